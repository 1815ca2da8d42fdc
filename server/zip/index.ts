export { createZipArchive, describeUnsafeName } from './zip-archive.ts';
