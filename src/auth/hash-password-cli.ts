#!/usr/bin/env node
import { createInterface } from 'node:readline';
import { hashPassword } from '../foundation/password-hash.js';

/**
 * `npm run hash-password`: reads one password from standard input (never from argv, which
 * other users can see in `ps`) and prints the hash line for the credentials file.
 */
async function readPassword(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Password (input is not hidden; pipe it in to avoid the terminal): ');
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return '';
}

const password = await readPassword();
if (password.length < 12) {
  process.stderr.write('hash-password: the password must have at least 12 characters\n');
  process.exit(2);
}
process.stdout.write(`${await hashPassword(password)}\n`);
