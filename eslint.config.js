// @ts-check
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { importX } from 'eslint-plugin-import-x';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** A relative import that climbs into one of these src folders (from any depth below src/). */
const into = (...folders) => `^(\\./)?(\\.\\./)+(${folders.join('|')})(/|$)`;

/** Fastify itself and its plugins: only the edge (HTTP) and the wiring at the root may know them. */
const FASTIFY = {
  regex: '^(fastify(-[\\w-]+)?|@fastify/.+)(/.*)?$',
  message: 'Only src/edge and the root wiring (app.ts, server.ts) know Fastify: the core must run without HTTP.',
};

/**
 * Folder layering (docs/layout.md): foundation at the bottom, then config, the ports (store,
 * observability, connector), the use cases (auth, cards, then events), edge on top; the root files (app.ts,
 * compose.ts, main.ts, server.ts, ...) may import anything. Each folder lists what sits above
 * it, so an upward import fails the lint instead of waiting for a reviewer. Flat config does not
 * merge one rule's options across blocks, so every file must match exactly one of these.
 */
const upward = (folders, ...extra) => ({
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        ...(folders.length > 0 ? [{ regex: into(...folders), message: `A lower folder must not import from ${folders.join(', ')} (docs/layout.md).` }] : []),
        ...extra,
      ],
    },
  ],
});
const LAYERS = [
  {
    files: ['src/foundation/**/*.ts'],
    rules: upward([], { regex: '^(\\./)?\\.\\.(/|$)', message: 'src/foundation is the ground floor: it imports nothing of ours.' }, FASTIFY),
  },
  { files: ['src/config/**/*.ts'], rules: upward(['store', 'observability', 'connector', 'auth', 'cards', 'events', 'edge'], FASTIFY) },
  { files: ['src/store/**/*.ts'], rules: upward(['observability', 'connector', 'auth', 'cards', 'events', 'edge'], FASTIFY) },
  { files: ['src/observability/**/*.ts'], rules: upward(['connector', 'auth', 'cards', 'events', 'edge'], FASTIFY) },
  // The sandbox connector is a separate development server, built on Fastify by design.
  {
    files: ['src/connector/**/*.ts'],
    ignores: ['src/connector/sandbox/**'],
    rules: upward(['store', 'observability', 'auth', 'cards', 'events', 'edge'], FASTIFY),
  },
  { files: ['src/connector/sandbox/**/*.ts'], rules: upward(['store', 'observability', 'auth', 'cards', 'events', 'edge']) },
  { files: ['src/auth/**/*.ts', 'src/cards/**/*.ts'], rules: upward(['events', 'edge'], FASTIFY) },
  // Events sit beside the card use cases, on them: the cards own their events port, events implement it.
  { files: ['src/events/**/*.ts'], rules: upward(['edge'], FASTIFY) },
];

/**
 * No library type crosses the store port (issue 18): only src/store knows ioredis and
 * rate-limiter-flexible. typescript-eslint's twin of no-restricted-imports, so that it adds to
 * the layer rules above instead of replacing them (type imports are refused too).
 */
const STORE_LIBRARIES = {
  files: ['src/**/*.ts'],
  ignores: ['src/store/**'],
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: '^(ioredis|rate-limiter-flexible)(/.*)?$',
            message: 'Only src/store knows ioredis and rate-limiter-flexible: the rest of the gateway speaks the store port (store-types.ts).',
          },
        ],
      },
    ],
  },
};

/**
 * No import cycle in the gateway or the client (issue 18). `import-x/no-cycle` follows every
 * import that exists at run time; `import type` is erased by the compiler and the rule skips it
 * by design. The TypeScript resolver maps the NodeNext `.js` specifiers to their `.ts` sources,
 * and the extension and parser settings let the rule read the imports of the files it reaches:
 * without them it sees no imports and passes everything (test/tooling/import-cycles.test.ts
 * guards against that).
 */
const NO_CYCLE = {
  files: ['src/**/*.ts', 'client/src/**/*.ts'],
  plugins: { 'import-x': importX },
  settings: {
    'import-x/extensions': ['.ts', '.js'],
    'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    'import-x/resolver-next': [createTypeScriptImportResolver({ project: fileURLToPath(new URL('tsconfig.json', import.meta.url)) })],
  },
  rules: { 'import-x/no-cycle': 'error' },
};

/**
 * One lint configuration for the whole repository: ESLint's and typescript-eslint's recommended
 * rules (the TypeScript-aware ones need no type information, so linting stays fast), with
 * formatting left to Prettier.
 */
export default tseslint.config(
  { ignores: ['dist/**', 'client/dist/**', 'node_modules/**', 'bench/profiles/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2023, sourceType: 'module' },
    rules: {
      // Unused names are a typecheck error already (noUnusedLocals/-Parameters), with `_` exemptions.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-constant-condition': ['error', { checkLoops: false }],
      eqeqeq: ['error', 'always'],
      // A `let` read by closures before its one assignment cannot become a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  ...LAYERS,
  STORE_LIBRARIES,
  NO_CYCLE,
  prettier,
);
