// A picture like the ones image models paint, for thumbnails and the gallery's bench: soft shapes, colour
// gradients and fine grain, deterministic (the same bytes every run), as a real 8-bit RGB PNG.
import { encodeRgbPng } from '../fakes/png-bytes.ts';

export function paintPicture(width: number, height: number, seed = 1): Uint8Array {
  let state = seed >>> 0 || 1;
  const grain = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return (state / 0xffffffff - 0.5) * 24;
  };
  const shift = seed * 0.7;
  return encodeRgbPng(width, height, (x, y) => {
    const a = Math.sin(x / 37 + shift) * Math.cos(y / 53);
    const b = Math.sin((x + y) / 19 + shift);
    const c = Math.sin((x * y) / 9000);
    const n = grain();
    return [128 + 90 * a + 20 * c + n, 110 + 60 * b + 30 * a + n, 90 + 70 * c - 20 * b + n];
  });
}
