// Images of an observation: read from its JSON form into the typed arrays the model takes, and
// drawn on canvases. An image comes either as recordings write it (entityrl/export/replay.py:
// {shape: [h, w, c], dtype: "uint8" | "float32", data: base64 of the raw little-endian bytes,
// row-major}) or, from a JavaScript environment, as a plain nested array [h][w][c] (or a flat
// array of h * w * c values, row-major). Names come from models and recordings: they reach the
// page as text, never as HTML.

const TYPED = { uint8: Uint8Array, float32: Float32Array };

function sameShape(a, b) {
  return a.length === b.length && a.every((n, i) => n === b[i]);
}

// The raw little-endian bytes of base64 `text` as an array of `dtype`.
function fromBase64(text, dtype, what) {
  let binary;
  try {
    binary = atob(text);
  } catch (err) {
    throw new Error(`${what}: data is not base64 (${err.message})`);
  }
  const bytes = Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
  if (dtype === "uint8") return bytes;
  if (bytes.length % 4) throw new Error(`${what}: ${bytes.length} bytes are no whole float32 values`);
  const view = new DataView(bytes.buffer);
  return Float32Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(4 * i, true));
}

// Image `name` of an observation (`given`, either form above) as the typed array of `spec`
// ({shape, dtype} from the model's or the recording's spaces); errors name the image, what was
// expected and what came.
export function imagePixels(name, given, spec) {
  const what = `image ${name}`;
  const expected = `[${spec.shape.join(", ")}] of ${spec.dtype}`;
  const size = spec.shape.reduce((a, b) => a * b, 1);
  if (given == null) throw new Error(`${what}: expected ${expected}, got none`);
  let pixels;
  if (Array.isArray(given) || ArrayBuffer.isView(given)) {
    pixels = TYPED[spec.dtype].from(Array.isArray(given) ? given.flat(2) : given);
  } else {
    const shape = given.shape ?? [];
    if (given.dtype !== spec.dtype || !sameShape(shape, spec.shape)) {
      throw new Error(`${what}: expected ${expected}, got [${shape.join(", ")}] of ${given.dtype}`);
    }
    pixels = fromBase64(given.data ?? "", spec.dtype, what);
  }
  if (pixels.length !== size) {
    throw new Error(`${what}: expected ${expected} (${size} values), got ${pixels.length} values`);
  }
  return pixels;
}

// The model's input of image `name`: one observation's pixels, (1, h, w, c).
export function imageTensor(name, given, spec) {
  return { type: spec.dtype, data: imagePixels(name, given, spec), dims: [1, ...spec.shape] };
}

// What a drawing shows of an image of `channels` channels: grey, RGB, RGBA, or for any
// other count its first channel as grey.
export function channelNote(channels) {
  if (channels === 1) return "grey";
  if (channels === 3) return "RGB";
  if (channels === 4) return "RGBA";
  return `first of ${channels} channels, as grey`;
}

// Draws `pixels` (of `spec`) on `canvas`, one canvas pixel per image pixel: float32 values in
// [0, 1] scaled to 0-255, uint8 as they are.
export function drawImage(canvas, pixels, spec) {
  const [height, width, channels] = spec.shape;
  canvas.width = width;
  canvas.height = height;
  const scale = spec.dtype === "float32" ? 255 : 1;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(width, height);
  const rgba = image.data; // a clamped array: values outside 0-255 saturate
  for (let p = 0; p < width * height; p++) {
    const at = p * channels;
    const colour = channels === 3 || channels === 4;
    rgba[4 * p] = pixels[at] * scale;
    rgba[4 * p + 1] = (colour ? pixels[at + 1] : pixels[at]) * scale;
    rgba[4 * p + 2] = (colour ? pixels[at + 2] : pixels[at]) * scale;
    rgba[4 * p + 3] = channels === 4 ? pixels[at + 3] * scale : 255;
  }
  ctx.putImageData(image, 0, 0);
}

// Fills `container` with a figure per image of `spaces` in `obs`: its canvas and a caption
// (name, shape, dtype, how its channels are shown). An image the step lacks says so.
export function showImages(container, spaces, obs) {
  const figures = Object.entries(spaces.images ?? {}).map(([name, spec]) => {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    const [height, width, channels] = spec.shape;
    caption.textContent = `${name}: ${height}×${width}×${channels} ${spec.dtype} (${channelNote(channels)})`;
    const given = obs.images?.[name];
    if (given == null) {
      caption.textContent += ": not in this step";
    } else {
      const canvas = document.createElement("canvas");
      canvas.className = "image";
      canvas.dataset.image = name;
      drawImage(canvas, imagePixels(name, given, spec), spec);
      figure.append(canvas);
    }
    figure.append(caption);
    return figure;
  });
  container.replaceChildren(...figures);
}
