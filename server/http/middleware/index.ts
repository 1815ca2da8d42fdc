export { addSecurityHeaders, CONTENT_SECURITY_POLICY } from './security-headers.ts';
export { allowListedHosts, parseHostName, type AllowedHostsOptions } from './allowed-hosts.ts';
export { refuseCrossSiteWrites } from './cross-site-writes.ts';
export { requireToken, TOKEN_COOKIE, type TokenOptions } from './token.ts';
