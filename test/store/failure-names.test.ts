import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { nameFailure, NOT_CONNECTED } from '../../src/store/redis/server-state.js';
import { StoreUnavailableError } from '../../src/store/store-types.js';

/**
 * D55: a failed store command is named by what Redis or the connection said, not by ioredis's
 * "Stream isn't writeable". The connection's last error (health-monitor.ts keeps it until the
 * client is ready again) names a command that failed only because the connection is not up,
 * and names the refused password behind a NOAUTH.
 */
const reply = (message: string): Error => new ReplyError(message);
const WRONGPASS = 'WRONGPASS invalid username-password pair or user is disabled.';
const NOAUTH = 'NOAUTH Authentication required.';
const notWriteable = new Error("Stream isn't writeable and enableOfflineQueue options is false");

describe('naming a store failure (D55)', () => {
  it('names Redis refusals by their own words', () => {
    expect(nameFailure(reply(WRONGPASS))).toEqual({ reason: 'authentication_refused', detail: WRONGPASS });
    expect(nameFailure(reply(NOAUTH))).toEqual({ reason: 'authentication_refused', detail: NOAUTH });
    expect(nameFailure(reply('ERR invalid password'))).toEqual({ reason: 'authentication_refused', detail: 'ERR invalid password' });
    expect(nameFailure(reply("OOM command not allowed when used memory > 'maxmemory'."))).toMatchObject({ reason: 'out_of_memory' });
    expect(nameFailure(reply("READONLY You can't write against a read only replica."))).toMatchObject({ reason: 'read_only' });
  });

  it('a NOAUTH on a connection whose AUTH was refused is named by the refused password', () => {
    // ioredis writes INFO while a connection is still in its handshake: after a refused AUTH,
    // the server answers it NOAUTH, which would send an operator looking for a missing password.
    expect(nameFailure(reply(NOAUTH), reply(WRONGPASS))).toEqual({ reason: 'authentication_refused', detail: WRONGPASS });
    expect(nameFailure(new StoreUnavailableError(reply(NOAUTH)), reply(WRONGPASS))).toEqual({ reason: 'authentication_refused', detail: WRONGPASS });
  });

  it('a NOAUTH keeps its words when the connection said anything else, or nothing', () => {
    expect(nameFailure(reply(NOAUTH))).toEqual({ reason: 'authentication_refused', detail: NOAUTH });
    expect(nameFailure(reply(NOAUTH), reply(NOAUTH))).toEqual({ reason: 'authentication_refused', detail: NOAUTH });
    expect(nameFailure(reply(NOAUTH), new Error('connect ECONNREFUSED 127.0.0.1:6390'))).toEqual({ reason: 'authentication_refused', detail: NOAUTH });
  });

  it('a command refused for want of a connection is named by the connection error, or as not connected', () => {
    expect(nameFailure(notWriteable, reply(WRONGPASS))).toEqual({ reason: 'authentication_refused', detail: WRONGPASS });
    expect(nameFailure(notWriteable, reply(NOAUTH))).toEqual({ reason: 'authentication_refused', detail: NOAUTH });
    expect(nameFailure(notWriteable, new Error('connect ECONNREFUSED 127.0.0.1:6390'))).toEqual({
      reason: 'unreachable',
      detail: 'connect ECONNREFUSED 127.0.0.1:6390',
    });
    expect(nameFailure(notWriteable)).toEqual({ reason: 'unreachable', detail: NOT_CONNECTED });
  });
});
