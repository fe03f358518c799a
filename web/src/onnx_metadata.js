// The metadata_props of an ONNX model (ModelProto field 14: key/value string pairs), read
// straight from the protobuf bytes: onnxruntime-web does not expose them.

const METADATA_PROPS = 14;
const LENGTH_DELIMITED = 2;

function readVarint(bytes, at) {
  let value = 0;
  let scale = 1;
  for (;;) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, at];
    scale *= 128;
  }
}

// Calls visit(field, wireType, start, end) for every field of the message bytes[from, to).
function walk(bytes, from, to, visit) {
  let at = from;
  while (at < to) {
    let key;
    [key, at] = readVarint(bytes, at);
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) {
      [, at] = readVarint(bytes, at);
    } else if (wire === 1) {
      at += 8;
    } else if (wire === 5) {
      at += 4;
    } else if (wire === LENGTH_DELIMITED) {
      let length;
      [length, at] = readVarint(bytes, at);
      visit(field, wire, at, at + length);
      at += length;
    } else {
      throw new Error(`not an ONNX model: unsupported protobuf wire type ${wire}`);
    }
  }
}

export function onnxMetadata(buffer) {
  const bytes = new Uint8Array(buffer);
  const decoder = new TextDecoder();
  const metadata = {};
  walk(bytes, 0, bytes.length, (field, wire, start, end) => {
    if (field !== METADATA_PROPS || wire !== LENGTH_DELIMITED) return;
    const entry = {};
    walk(bytes, start, end, (f, w, s, e) => {
      entry[f] = decoder.decode(bytes.subarray(s, e));
    });
    metadata[entry[1]] = entry[2] ?? "";
  });
  return metadata;
}
