import { join } from 'node:path';
import ts from 'typescript';
import { REPO, type Json } from './support.js';

/**
 * Unknown fields in Kubernetes objects, found by TypeScript's excess-property check against the
 * `kubernetes-models` declarations (generated from the Kubernetes OpenAPI schema, the same
 * source as its runtime validators). Those validators accept unknown fields, as a lenient API
 * server would; `kubectl --validate=strict` refuses them, and a misspelt field
 * (`readinesProbe`) would otherwise be dropped without a word.
 */
export interface TypedObject {
  /** Where it came from, for messages: `deployment.yaml: Deployment card-gateway`. */
  label: string;
  /** `kubernetes-models` module of its kind, e.g. `kubernetes-models/apps/v1/Deployment`. */
  module: string;
  /** The interface the module exports for it, e.g. `IDeployment`. */
  typeName: string;
  value: Json;
}

export function unknownFieldProblems(objects: readonly TypedObject[]): string[] {
  // A virtual file inside the repository, so that `kubernetes-models` resolves from node_modules.
  const fileName = join(REPO, 'test', 'deploy', '__kubernetes-manifests__.ts');
  const text = objects
    .map((object, index) => `import type { ${object.typeName} as T${index} } from '${object.module}';\nexport const m${index}: T${index} = ${JSON.stringify(object.value, null, 2)};\n`)
    .join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.getSourceFile = (name, languageVersion, onError, shouldCreate) =>
    name === fileName ? ts.createSourceFile(name, text, languageVersion, true) : getSourceFile(name, languageVersion, onError, shouldCreate);
  host.fileExists = (name) => name === fileName || fileExists(name);
  host.readFile = (name) => (name === fileName ? text : readFile(name));
  const program = ts.createProgram([fileName], options, host);
  const source = program.getSourceFile(fileName);
  if (!source) throw new Error('the virtual manifest file was not loaded');
  return ts.getPreEmitDiagnostics(program, source).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.start === undefined) return message;
    // Name the object the problem is in: the `export const mN` it sits under.
    const declarations = [...text.slice(0, diagnostic.start).matchAll(/export const m(\d+):/g)];
    const index = Number(declarations.at(-1)?.[1] ?? -1);
    const { line } = source.getLineAndCharacterOfPosition(diagnostic.start);
    const context = text.split('\n')[line]?.trim() ?? '';
    return `${objects[index]?.label ?? 'imports'}: ${message} (at ${context})`;
  });
}
