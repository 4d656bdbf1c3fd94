// The package's build (`npm run build`, and `prepack`, so `npm pack` and `npm publish` ship it):
// ESM into dist/esm, CommonJS into dist/cjs, each with its own declarations, so that `import`
// and `require` each get code and types of their own module format. dist/cjs gets a package.json
// of its own saying "commonjs": without it Node would read its .js as ESM (the package is
// "type": "module"). Then the README's example program into dist/examples (not shipped).
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compile = (project) => execFileSync(process.execPath, [tsc, '-p', project], { cwd: root, stdio: 'inherit' });

// From scratch: a module removed from src/ must not live on in the package.
rmSync(`${root}dist`, { recursive: true, force: true });
compile('tsconfig.json');
compile('tsconfig.cjs.json');
mkdirSync(`${root}dist/cjs`, { recursive: true });
writeFileSync(`${root}dist/cjs/package.json`, `${JSON.stringify({ type: 'commonjs' })}\n`);
compile('tsconfig.examples.json');
