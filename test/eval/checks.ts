// The fixed check cases of the vision model's report card (`npm run eval -- --vision-model NAME`): simple,
// unambiguous scenes (flat shapes in plain colours, 512×512) with a request that asks for something the picture
// does not show (a planted miss), or for just what it shows. The fake AUTOMATIC1111 paints each request as its
// scene, so the vision model is asked about a picture whose answer is known.
import sharp from 'sharp';

export interface CheckCase {
  name: string;
  /** What the user asked for: the prompt Easel is asked to paint. The fake image server knows the case by it. */
  request: string;
  /** The picture, an SVG of CHECK_SIZE × CHECK_SIZE. */
  svg: string;
  /** Keywords of the request's elements the picture does show ('red', 'circle'): a miss naming only these is false. */
  present: string[];
  /** One keyword for each element of the request the picture lacks or gets wrong ('triangle'): what a check should find. */
  planted: string[];
  /** The main shape the picture shows (what a description should name). */
  shape: string;
}

export const CHECK_SIZE = 512;

function scene(...shapes: string[]): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${CHECK_SIZE}" height="${CHECK_SIZE}" viewBox="0 0 ${CHECK_SIZE} ${CHECK_SIZE}">${shapes.join('')}</svg>`;
}

const WHITE = '<rect width="512" height="512" fill="#ffffff"/>';
const BLACK = '<rect width="512" height="512" fill="#000000"/>';
const circle = (cx: number, cy: number, r: number, fill: string) => `<circle cx="${cx}" cy="${cy}" r="${r}" fill="${fill}"/>`;
const square = (x: number, y: number, size: number, fill: string) => `<rect x="${x}" y="${y}" width="${size}" height="${size}" fill="${fill}"/>`;
const triangle = (fill: string) => `<polygon points="256,76 446,416 66,416" fill="${fill}"/>`;

export const CHECK_CASES: readonly CheckCase[] = [
  {
    name: 'a red circle, nothing missing',
    request: 'a red circle on a white background',
    svg: scene(WHITE, circle(256, 256, 160, '#e01010')),
    present: ['red', 'circle', 'white', 'background'],
    planted: [],
    shape: 'circle',
  },
  {
    name: 'the green triangle left out',
    request: 'a red circle and a green triangle on a white background',
    svg: scene(WHITE, circle(256, 256, 160, '#e01010')),
    present: ['red', 'circle', 'white', 'background'],
    planted: ['triangle'],
    shape: 'circle',
  },
  {
    name: 'the square in the wrong colour',
    request: 'a blue square on a white background',
    svg: scene(WHITE, square(106, 106, 300, '#ff8800')),
    present: ['square', 'white', 'background'],
    planted: ['blue'],
    shape: 'square',
  },
  {
    name: 'the yellow circle left out',
    request: 'a blue square next to a yellow circle on a white background',
    svg: scene(WHITE, square(56, 156, 200, '#1030e0')),
    present: ['blue', 'square', 'white', 'background'],
    planted: ['circle'],
    shape: 'square',
  },
  {
    name: 'a circle for a triangle',
    request: 'a green triangle on a white background',
    svg: scene(WHITE, circle(256, 256, 160, '#10a020')),
    present: ['green', 'white', 'background'],
    planted: ['triangle'],
    shape: 'circle',
  },
  {
    name: 'two squares for three',
    request: 'three purple squares in a row on a white background',
    svg: scene(WHITE, square(76, 186, 140, '#8020c0'), square(296, 186, 140, '#8020c0')),
    present: ['purple', 'square', 'white', 'background'],
    planted: ['three'],
    shape: 'square',
  },
  {
    name: 'a white background for a black one',
    request: 'a red circle on a black background',
    svg: scene(WHITE, circle(256, 256, 160, '#e01010')),
    present: ['red', 'circle'],
    planted: ['black'],
    shape: 'circle',
  },
  {
    name: 'a green triangle, nothing missing',
    request: 'a green triangle on a black background',
    svg: scene(BLACK, triangle('#10c020')),
    present: ['green', 'triangle', 'black', 'background'],
    planted: [],
    shape: 'triangle',
  },
];

/** The case's picture as a PNG. */
export async function renderCase(check: CheckCase): Promise<Uint8Array> {
  return new Uint8Array(await sharp(Buffer.from(check.svg)).png().toBuffer());
}

/**
 * Every case's picture rendered, and the fake image server's `paint`: the picture of the case whose request is the
 * prompt exactly. A prompt no case asked for is a mistake of the report card (Easel changed the prompt, or the
 * chat conversations made an image): it throws, so the image fails loudly rather than being checked as something else.
 */
export async function renderCases(cases: readonly CheckCase[]): Promise<{ pictures: Map<string, Uint8Array>; paint: (prompt: string, width: number, height: number) => Uint8Array }> {
  const pictures = new Map<string, Uint8Array>();
  for (const check of cases) pictures.set(check.request, await renderCase(check));
  return {
    pictures,
    paint(prompt) {
      const picture = pictures.get(prompt);
      if (picture === undefined) throw new Error(`the report card has no check case asking for ${JSON.stringify(prompt)}`);
      return picture;
    },
  };
}
