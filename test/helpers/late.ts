/**
 * A stand-in for an object that a hook makes later (in beforeAll or beforeEach), so that a fixture can register
 * the hooks and hand the suite plain names (`fake`, `easel`, `page`) at once: when a test or a later hook uses
 * the stand-in, every property read, write and method call goes to the object `current()` gives at that moment.
 * Used before the hook made it (while the file is being collected, say), it throws and says so.
 */
export function late<T extends object>(name: string, current: () => T | undefined): T {
  const target = (): T => {
    const value = current();
    if (value === undefined) throw new Error(`${name} is not started yet: use it inside a test or a hook, after the hook that starts it.`);
    return value;
  };
  return new Proxy({} as T, {
    get(_, key) {
      // Not a promise: `await` and the test runner's checks may ask before the object exists.
      if (key === 'then' && current() === undefined) return undefined;
      const value = target();
      const property: unknown = Reflect.get(value, key, value);
      // A method runs on the object itself, not on the stand-in.
      return typeof property === 'function' ? property.bind(value) : property;
    },
    set: (_, key, value) => Reflect.set(target(), key, value),
    has: (_, key) => Reflect.has(target(), key),
    ownKeys: () => Reflect.ownKeys(target()),
    getOwnPropertyDescriptor(_, key) {
      const descriptor = Reflect.getOwnPropertyDescriptor(target(), key);
      return descriptor && { ...descriptor, configurable: true };
    },
  });
}
