// The module /assets/token-estimate.js, made at start from the server's own function (server/http/page/assets.ts):
// this says its type to the checker.
export { estimateEncoderTokens } from '../../server/protocol/families.ts';
