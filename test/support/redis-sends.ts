import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';

/** The command names in a chunk of RESP the client wrote (arrays of bulk strings). */
function commandNames(chunk: Buffer): string[] {
  const names: string[] = [];
  let at = 0;
  const line = () => {
    const end = chunk.indexOf('\r\n', at);
    const text = chunk.toString('latin1', at + 1, end);
    at = end + 2;
    return Number(text);
  };
  while (at < chunk.length && chunk[at] === 0x2a /* '*' */) {
    const count = line();
    for (let i = 0; i < count; i += 1) {
      const length = line();
      if (i === 0) names.push(chunk.toString('latin1', at, at + length).toLowerCase());
      at += length + 2;
    }
  }
  return names;
}

type Chunk = string | Buffer;
type CountedSocket = Socket & {
  _write(chunk: Chunk, encoding: BufferEncoding, callback: (error?: Error | null) => void): void;
  _writev(chunks: { chunk: Chunk; encoding: BufferEncoding }[], callback: (error?: Error | null) => void): void;
};

/**
 * Records each send the client's socket makes to Redis (one `_write` or `_writev`: one write to
 * the kernel, one round trip when awaited) as the names of the commands in it. Both forward to
 * the real socket: nothing is sent differently, only seen. The client must be connected.
 */
export function recordSends(client: Redis): { readonly sends: string[][]; clear(): void } {
  const socket = client.stream as CountedSocket;
  const sends: string[][] = [];
  const names = (chunk: Chunk, encoding: BufferEncoding) => commandNames(typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk);
  const write = socket._write.bind(socket);
  const writev = socket._writev.bind(socket);
  socket._write = (chunk, encoding, callback) => {
    sends.push(names(chunk, encoding));
    write(chunk, encoding, callback);
  };
  socket._writev = (chunks, callback) => {
    sends.push(chunks.flatMap(({ chunk, encoding }) => names(chunk, encoding)));
    writev(chunks, callback);
  };
  return { sends, clear: () => void sends.splice(0) };
}
