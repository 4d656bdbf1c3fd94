// @ts-check
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

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
  prettier,
);
