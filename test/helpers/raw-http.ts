// A request with exactly the headers a test chooses: fetch refuses to set Host (and Origin,
// Sec-Fetch-Site are what a browser would add), node's http.request sends what it is given.
import { request, type IncomingHttpHeaders } from 'node:http';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface RawRequest {
  method?: string;
  /** Path and query, sent as they are (no encoding). */
  path: string;
  /** An array sends the header once per value, as separate lines. */
  headers?: Record<string, string | string[]>;
  body?: string;
}

/** Sends one request to `baseUrl` (the server's own address) and reads the whole answer. */
export function rawRequest(baseUrl: string, options: RawRequest): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname: hostname.replace(/^\[(.*)\]$/, '$1'),
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: { ...(options.body !== undefined ? { 'content-length': String(Buffer.byteLength(options.body)) } : {}), ...options.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}
