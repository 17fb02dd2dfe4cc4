// ROS1 messages in the browser: a `ros1msg` schema (a message definition as the
// connection header's `message_definition` carries it: the main type, then each
// dependency after a line of `=` and `MSG: pkg/Type`) becomes a decoder of the bytes that
// publishers send. Byte arrays stay views into the frame (an image is not copied);
// 64-bit integers become Numbers (exact up to 2^53, which covers nanosecond times).

const PRIMITIVES = {
  bool: [1, (v, o) => v.getUint8(o) !== 0],
  int8: [1, (v, o) => v.getInt8(o)],
  uint8: [1, (v, o) => v.getUint8(o)],
  byte: [1, (v, o) => v.getInt8(o)],
  char: [1, (v, o) => v.getUint8(o)],
  int16: [2, (v, o) => v.getInt16(o, true)],
  uint16: [2, (v, o) => v.getUint16(o, true)],
  int32: [4, (v, o) => v.getInt32(o, true)],
  uint32: [4, (v, o) => v.getUint32(o, true)],
  int64: [8, (v, o) => Number(v.getBigInt64(o, true))],
  uint64: [8, (v, o) => Number(v.getBigUint64(o, true))],
  float32: [4, (v, o) => v.getFloat32(o, true)],
  float64: [8, (v, o) => v.getFloat64(o, true)],
  time: [8, (v, o) => ({ sec: v.getUint32(o, true), nsec: v.getUint32(o + 4, true) })],
  duration: [8, (v, o) => ({ sec: v.getInt32(o, true), nsec: v.getInt32(o + 4, true) })],
};

/** Why bytes did not decode: the message is shorter than its schema says. */
export class DecodeError extends Error {}

/**
 * Parses a ros1msg schema into `{ name: [field, ...] }` by full type name, with the main
 * type's name as `main`. A field is `{ name, type, array }`, `array` being `undefined`
 * (a single value), `-1` (a length-prefixed array) or a fixed length. Constants are
 * left out: they are not on the wire.
 */
export function parseSchema(schemaName, schema) {
  const types = {};
  const sections = schema.split(/^=+\s*$/m);
  sections.forEach((text, i) => {
    let name = schemaName;
    const lines = text.split("\n").map((l) => l.replace(/#.*/, "").trim()).filter(Boolean);
    if (i > 0) {
      const header = lines.shift() ?? "";
      const match = header.match(/^MSG:\s*(\S+)$/);
      if (!match) return; // not a dependency section
      name = match[1];
    }
    const pkg = name.includes("/") ? name.split("/")[0] : "";
    types[name] = lines
      .filter((l) => !/^\S+\s+\w+\s*=/.test(l)) // constants
      .map((l) => {
        const [, rawType, fieldName] = l.match(/^(\S+)\s+(\w+)/) ?? [];
        if (!rawType) throw new Error(`cannot read the field line "${l}" of ${name}`);
        const [, base, length] = rawType.match(/^([^[]+)(?:\[(\d*)\])?$/);
        return {
          name: fieldName,
          type: resolveType(base, pkg),
          array: length === undefined ? undefined : length === "" ? -1 : Number(length),
        };
      });
  });
  return { main: schemaName, types };
}

function resolveType(base, pkg) {
  if (base in PRIMITIVES || base === "string") return base;
  if (base === "Header") return "std_msgs/Header";
  return base.includes("/") ? base : `${pkg}/${base}`;
}

/** A decoder of one type's bytes, from a parsed schema. */
export function makeReader(parsed) {
  const text = new TextDecoder();
  function read(view, state, typeName) {
    const fields = parsed.types[typeName];
    if (!fields) throw new Error(`the schema does not define ${typeName}`);
    const out = {};
    for (const f of fields) {
      if (f.array === undefined) {
        out[f.name] = one(view, state, f.type);
        continue;
      }
      let count = f.array;
      if (count < 0) {
        need(view, state, 4);
        count = view.getUint32(state.offset, true);
        state.offset += 4;
      }
      if (f.type === "uint8" || f.type === "char") {
        need(view, state, count);
        out[f.name] = new Uint8Array(view.buffer, view.byteOffset + state.offset, count);
        state.offset += count;
        continue;
      }
      // Each element takes at least a byte: a count past the frame is a lie, caught
      // before any array of that size is made.
      need(view, state, count);
      const items = new Array(count);
      for (let i = 0; i < count; i++) items[i] = one(view, state, f.type);
      out[f.name] = items;
    }
    return out;
  }
  function one(view, state, type) {
    const primitive = PRIMITIVES[type];
    if (primitive) {
      need(view, state, primitive[0]);
      const value = primitive[1](view, state.offset);
      state.offset += primitive[0];
      return value;
    }
    if (type === "string") {
      need(view, state, 4);
      const length = view.getUint32(state.offset, true);
      state.offset += 4;
      need(view, state, length);
      const bytes = new Uint8Array(view.buffer, view.byteOffset + state.offset, length);
      state.offset += length;
      return text.decode(bytes);
    }
    return read(view, state, type);
  }
  function need(view, state, bytes) {
    if (state.offset + bytes > view.byteLength) {
      throw new DecodeError(`the message ends before its ${parsed.main} does`);
    }
  }
  return (bytes) => {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return read(view, { offset: 0 }, parsed.main);
  };
}
