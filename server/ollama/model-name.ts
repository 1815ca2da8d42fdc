// Ollama names are `[host/][namespace/]model[:tag]`: a missing tag means `latest`, the default
// host and namespace can be left out, and names compare case-insensitively.

const DEFAULT_PREFIXES = ['registry.ollama.ai/', 'library/'];

export function normalizeModelName(name: string): string {
  let normalized = name.trim().toLowerCase();
  for (const prefix of DEFAULT_PREFIXES) {
    if (normalized.startsWith(prefix)) normalized = normalized.slice(prefix.length);
  }
  const lastSlash = normalized.lastIndexOf('/');
  // A colon before the last slash belongs to a registry port (`host:5000/model`), not to a tag.
  const hasTag = normalized.indexOf(':', lastSlash + 1) !== -1;
  return hasTag ? normalized : `${normalized}:latest`;
}

export function isSameModel(a: string, b: string): boolean {
  return normalizeModelName(a) === normalizeModelName(b);
}
