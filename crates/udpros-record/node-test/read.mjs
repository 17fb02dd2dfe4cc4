// Reads an MCAP file with @mcap/core's indexed reader (its summary, chunk indexes and
// message indexes must be right for this to work) and prints, per channel, its topic,
// schema name and encoding, message encoding, message count and first and last log time.
// Usage: node read.mjs FILE
import { open } from "node:fs/promises";
import { McapIndexedReader } from "@mcap/core";
import { decompress as zstd } from "fzstd";

const file = await open(process.argv[2], "r");
const size = (await file.stat()).size;
const readable = {
  size: async () => BigInt(size),
  read: async (offset, length) => {
    const buffer = new Uint8Array(Number(length));
    await file.read(buffer, 0, Number(length), Number(offset));
    return buffer;
  },
};
const reader = await McapIndexedReader.Initialize({
  readable,
  // MCAP's default chunks; fzstd is a plain-JavaScript Zstandard decoder.
  decompressHandlers: { zstd: (data, size) => zstd(data, new Uint8Array(Number(size))) },
});
const counts = new Map();
let last = -1n;
for await (const message of reader.readMessages()) {
  if (message.logTime < last) throw new Error("messages out of log-time order");
  last = message.logTime;
  counts.set(message.channelId, (counts.get(message.channelId) ?? 0) + 1);
}
for (const [id, channel] of reader.channelsById) {
  const schema = reader.schemasById.get(channel.schemaId);
  console.log(
    [channel.topic, schema.name, schema.encoding, channel.messageEncoding, counts.get(id) ?? 0].join(" "),
  );
}
await file.close();
