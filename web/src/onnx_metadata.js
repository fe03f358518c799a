// The metadata_props of an ONNX model (ModelProto field 14: key/value string pairs), read
// straight from the protobuf bytes: onnxruntime-web does not expose them. Every read is
// checked against the end of its message, so a truncated or foreign file fails with a message
// naming the byte where it stopped making sense, instead of reading past the end forever.

const METADATA_PROPS = 14;
const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const FIXED32 = 5;
// A varint holds at most 64 bits: 10 bytes of 7.
const MAX_VARINT_BYTES = 10;

function notAModel(reason, at, bytes) {
  return new Error(`not an ONNX model: ${reason} at byte ${at} of ${bytes.length}`);
}

// [value, next position] of the varint at `at`, which must end before `end`. Values above
// 2^53 lose precision, which only lengths and keys are read for (and those are checked).
function readVarint(bytes, at, end) {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < MAX_VARINT_BYTES; i++) {
    if (at >= end) throw notAModel("the file ends inside a number", at, bytes);
    const byte = bytes[at++];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, at];
    scale *= 128;
  }
  throw notAModel(`a number longer than ${MAX_VARINT_BYTES} bytes`, at, bytes);
}

// Calls visit(field, wireType, start, end) for every length-delimited field of the message
// bytes[from, to); skips the others.
function walk(bytes, from, to, visit) {
  let at = from;
  while (at < to) {
    const keyAt = at;
    let key;
    [key, at] = readVarint(bytes, at, to);
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw notAModel("a field numbered 0", keyAt, bytes);
    let end;
    if (wire === VARINT) {
      [, end] = readVarint(bytes, at, to);
    } else if (wire === FIXED64) {
      end = at + 8;
    } else if (wire === FIXED32) {
      end = at + 4;
    } else if (wire === LENGTH_DELIMITED) {
      let length;
      [length, at] = readVarint(bytes, at, to);
      end = at + length;
    } else {
      throw notAModel(`protobuf wire type ${wire} (ONNX uses 0, 1, 2 and 5)`, keyAt, bytes);
    }
    if (end > to) {
      throw notAModel(`field ${field} needs ${end - at} bytes, ${to - at} are left`, keyAt, bytes);
    }
    if (wire === LENGTH_DELIMITED) visit(field, at, end);
    at = end;
  }
}

export function onnxMetadata(buffer) {
  const bytes = new Uint8Array(buffer);
  if (!bytes.length) throw new Error("not an ONNX model: the file is empty");
  const decoder = new TextDecoder();
  const metadata = {};
  walk(bytes, 0, bytes.length, (field, start, end) => {
    if (field !== METADATA_PROPS) return;
    const entry = {};
    walk(bytes, start, end, (f, s, e) => {
      entry[f] = decoder.decode(bytes.subarray(s, e));
    });
    metadata[entry[1]] = entry[2] ?? "";
  });
  return metadata;
}
