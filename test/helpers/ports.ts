import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A loopback port where nothing listens (one that was free a moment ago): a server that is down. */
export async function findClosedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
