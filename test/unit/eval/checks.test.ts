// The check part of the report card: its fixed cases, their pictures and the fake image server's paint.
// (checks-run.test.ts runs the whole check part against the fake Ollama.)
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { CHECK_CASES, CHECK_SIZE, renderCase, renderCases, type CheckCase } from '../../eval/checks.ts';
import { mentions } from '../../eval/report.ts';

/** The RGB pixels of a PNG, to compare two encodings of one picture. */
async function pixels(png: Uint8Array): Promise<Buffer> {
  return sharp(png).removeAlpha().raw().toBuffer();
}

/** Whether two PNGs hold the same pixels (a Buffer compared whole: a deep equality of 786 432 bytes is slow). */
async function samePicture(a: Uint8Array, b: Uint8Array): Promise<boolean> {
  return (await pixels(a)).equals(await pixels(b));
}

/** The pixel at (x, y) of a rendered case. */
async function pixelAt(check: CheckCase, x: number, y: number): Promise<number[]> {
  const raw = await pixels(await renderCase(check));
  const at = (y * CHECK_SIZE + x) * 3;
  return [raw[at]!, raw[at + 1]!, raw[at + 2]!];
}

function caseNamed(name: string): CheckCase {
  const found = CHECK_CASES.find((check) => check.name === name);
  if (!found) throw new Error(`no case ${name}`);
  return found;
}

describe('the check cases', () => {
  it('are 6 to 8 fixed scenes, each request naming its keywords, planted and shown apart, one or more with nothing missing', () => {
    expect(CHECK_CASES.length).toBeGreaterThanOrEqual(6);
    expect(CHECK_CASES.length).toBeLessThanOrEqual(8);
    expect(new Set(CHECK_CASES.map((check) => check.request)).size).toBe(CHECK_CASES.length);
    expect(new Set(CHECK_CASES.map((check) => check.name)).size).toBe(CHECK_CASES.length);
    expect(CHECK_CASES.some((check) => check.planted.length === 0)).toBe(true);
    expect(CHECK_CASES.filter((check) => check.planted.length > 0).length).toBeGreaterThanOrEqual(4);
    for (const check of CHECK_CASES) {
      for (const keyword of [...check.planted, ...check.present]) expect(mentions(check.request, keyword), `${check.name}: ${keyword}`).toBe(true);
      for (const keyword of check.planted) expect(check.present.some((shown) => mentions(shown, keyword) || mentions(keyword, shown)), `${check.name}: ${keyword}`).toBe(false);
      expect(check.shape).toMatch(/^(circle|square|triangle)$/);
    }
  });

  it('render at 512×512 with the colours they claim', async () => {
    const circle = caseNamed('a red circle, nothing missing');
    const metadata = await sharp(await renderCase(circle)).metadata();
    expect([metadata.format, metadata.width, metadata.height]).toEqual(['png', CHECK_SIZE, CHECK_SIZE]);
    expect(await pixelAt(circle, 256, 256)).toEqual([0xe0, 0x10, 0x10]);
    expect(await pixelAt(circle, 5, 5)).toEqual([255, 255, 255]);
    // The triangle asked for is not there: the picture is the red circle alone.
    const leftOut = caseNamed('the green triangle left out');
    expect(await samePicture(await renderCase(leftOut), await renderCase(circle))).toBe(true);
    expect(await samePicture(await renderCase(leftOut), await renderCase(caseNamed('a circle for a triangle')))).toBe(false);
    expect(await pixelAt(caseNamed('the square in the wrong colour'), 256, 256)).toEqual([0xff, 0x88, 0x00]);
    const triangle = caseNamed('a green triangle, nothing missing');
    expect(await pixelAt(triangle, 256, 300)).toEqual([0x10, 0xc0, 0x20]);
    expect(await pixelAt(triangle, 5, 5)).toEqual([0, 0, 0]);
  });

  it('paint finds the case by its exact prompt, and refuses any other', async () => {
    const { paint, pictures } = await renderCases(CHECK_CASES);
    expect(pictures.size).toBe(CHECK_CASES.length);
    const square = caseNamed('the square in the wrong colour');
    expect(paint(square.request, CHECK_SIZE, CHECK_SIZE)).toBe(pictures.get(square.request));
    expect(() => paint(`${square.request}, masterpiece`, CHECK_SIZE, CHECK_SIZE)).toThrow(/no check case/);
  });
});

