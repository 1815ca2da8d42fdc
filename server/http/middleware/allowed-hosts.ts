import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../../core/index.ts';
import { respondMessage } from '../errors.ts';

export interface AllowedHostsOptions {
  /** Names (`my-laptop.local`), addresses (`192.168.1.20`, `[fe80::1]`), each optionally with `:port`. */
  hosts: readonly string[];
  logger: Logger;
}

interface HostName {
  hostname: string;
  /** '' when the entry names no port (then any port matches). */
  port: string;
}

/**
 * Refuses a request whose Host header is not one of this server's names, on every route: a
 * DNS-rebinding page (evil.example resolving to 127.0.0.1) reaches the socket, but its Host header
 * still says evil.example. Loopback names and *.localhost always pass: they cannot be rebound.
 *
 * Ports: an entry without a port matches the name on any port. Rebinding changes what a name resolves
 * to, never the port; and a port forward (`ssh -L 9000:127.0.0.1:8377`) or a proxy changes the port
 * the browser sends. An entry with a port (`my-laptop.local:8377`) matches that port only.
 */
export function allowListedHosts(options: AllowedHostsOptions): MiddlewareHandler {
  const allowed = options.hosts.map(parseHostName).filter((entry): entry is HostName => entry !== undefined);
  return async (c, next) => {
    const header = c.req.header('host');
    const host = header === undefined ? undefined : parseHostName(header);
    if (host && isAllowed(host, allowed)) return next();
    options.logger.warn('refused a request for another host name', { method: c.req.method, path: c.req.path, host: header });
    const message = host
      ? `Easel does not answer to the name "${host.hostname}" (this guards against DNS rebinding). ` +
        `If you opened Easel by this name on purpose, restart it with --allowed-hosts ${host.hostname}.`
      : 'The request has no valid Host header, so Easel cannot tell it from another site\'s. Open Easel at http://127.0.0.1 with its port, or add the name you use with --allowed-hosts.';
    return respondMessage(c, 403, message);
  };
}

function isAllowed(host: HostName, allowed: readonly HostName[]): boolean {
  const name = host.hostname;
  if (name === 'localhost' || name === '127.0.0.1' || name === '[::1]' || name.endsWith('.localhost')) return true;
  return allowed.some((entry) => entry.hostname === name && (entry.port === '' || entry.port === host.port));
}

/**
 * Reads `name[:port]` the way a browser writes it (WHATWG URL: lower case, IPv4 and IPv6 in canonical
 * form, port 80 dropped); one trailing dot is dropped, `localhost.` being the same DNS name. Undefined
 * for anything else (paths, user info, bad ports).
 */
export function parseHostName(value: string): HostName | undefined {
  const text = value.trim();
  // Stryker disable next-line ConditionalExpression,StringLiteral: an empty text makes new URL('http://') throw: the same undefined; the other text holds spaces, refused here
  if (text === '' || /[/?#@\\\s]/.test(text)) return undefined;
  // A bare IPv6 address (a --host of ::1) is written in brackets in a Host header.
  const bracketed = !text.startsWith('[') && (text.match(/:/g)?.length ?? 0) > 1 ? `[${text}]` : text;
  try {
    const url = new URL(`http://${bracketed}`);
    // Stryker disable BlockStatement: the catch below emptied: the function then returns undefined all the same
    return { hostname: url.hostname.replace(/(?<=[^.])\.$/, ''), port: url.port };
  } catch {
    // Stryker restore BlockStatement
    return undefined;
  }
}
