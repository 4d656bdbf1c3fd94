import { describe, expect, it } from 'vitest';
import { requestTemplate } from '../../bench/request-templates.js';
import { parseWrkOutput, wrkScript } from '../../bench/wrk.js';

/**
 * The wrk side of the bench (bench/wrk.ts): the generated Lua script carries the template's
 * pieces as Lua literals, and the figures are read from the script's own result line. (The
 * script itself was run against a recording server when it was written: every request had
 * its own requestId; CI has no wrk, so this test reads the text.)
 */

describe('wrkScript', () => {
  it('splits the body and headers at the requestId and escapes what Lua would read otherwise', () => {
    const script = wrkScript(requestTemplate('gateway-create', '/api/v1/issuing/cards', { token: 'a"b\\c\n1', clientAddresses: 256 }), 'abcdef');
    expect(script).toContain('["authorization"] = { "Bearer a\\034b\\092c\\0101" },');
    expect(script).toContain('local body_parts = { "{\\034requestId\\034:\\034", "\\034,\\034cardLimit\\034:125000');
    expect(script).toContain('local client_addresses = 256');
    expect(script).toContain('string.format("abcdef%02x", thread_index % 256)');
  });

  it('sends no body for a GET and no forwarded address without client addresses', () => {
    const script = wrkScript(requestTemplate('connector-read', '/api/v1/issuing/cards?limit=100', {}));
    expect(script).toContain('local body_parts = nil');
    expect(script).toContain('local client_addresses = 0');
    expect(script).toContain('["x-correlation-id"] = { "", "" },');
  });
});

describe('parseWrkOutput', () => {
  it("reads the script's result line among wrk's own lines", () => {
    const line =
      '{"requests":12,"durationUs":5000000,"connectErrors":0,"readErrors":1,"writeErrors":0,"statusErrors":2,"timeouts":0,"p50Us":800,"p99Us":2000,"p999Us":3000,"maxUs":4000}';
    expect(parseWrkOutput(`Running 5s test @ https://127.0.0.1:1/\n  1 threads and 16 connections\nWRK_RESULT ${line}\nRequests/sec: 2.40\n`)).toEqual(
      JSON.parse(line),
    );
  });

  it('fails, showing the output, when the line is missing', () => {
    expect(() => parseWrkOutput('unable to connect to 127.0.0.1:1 Connection refused\n')).toThrow(/wrk printed no result line:\nunable to connect/);
  });
});
