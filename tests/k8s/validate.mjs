// Validate Kubernetes objects offline against the real API schemas, strictly.
//
//   node validate.mjs FILE...      (FILE may be - for stdin; multi-document YAML)
//
// Two sources, both generated from Kubernetes' own OpenAPI and pinned in package-lock.json:
//   kubernetes-models   ajv validators: types, enums, required fields, formats (k8s ~1.32);
//   @kubernetes/client-node  each model's attribute list (k8s ~1.34), walked here to refuse any
//                       field the API does not have (what `kubectl apply --validate=strict`
//                       does with a server; kubernetes-models lets unknown fields through).
// Custom resources (agent-sandbox's) are checked against their CRDs' vendored OpenAPI schemas
// instead (crd.mjs), their metadata as an ObjectMeta. Duplicate YAML keys are refused too.
// Prints "ok KIND/NAME" or "FAIL KIND/NAME: why" per object and exits 1 if any failed or none
// was found.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import YAML from 'yaml';
import * as k8s from '@kubernetes/client-node';
import { loadCrds, schemaErrors as crdSchemaErrors } from './crd.mjs';

const require = createRequire(import.meta.url);
const PRIMITIVES = new Set(['string', 'number', 'boolean', 'Date', 'any', 'object', 'IntOrString']);
const CRDS = loadCrds();

// client-node's model name for an apiVersion and kind: networking.k8s.io/v1 NetworkPolicy ->
// V1NetworkPolicy.
function modelName(apiVersion, kind) {
  const version = apiVersion.includes('/') ? apiVersion.split('/')[1] : apiVersion;
  return version.charAt(0).toUpperCase() + version.slice(1) + kind;
}

// Every field of obj that the model `type` (a client-node type string) does not declare.
function unknownFields(obj, type, path) {
  if (obj === null || obj === undefined || PRIMITIVES.has(type)) return [];
  let m = /^Array<(.*)>$/.exec(type);
  if (m) {
    if (!Array.isArray(obj)) return [`${path}: expected a list`];
    return obj.flatMap((v, i) => unknownFields(v, m[1], `${path}[${i}]`));
  }
  m = /^\{ \[key: string\]: (.*); \}$/.exec(type);
  if (m) {
    if (typeof obj !== 'object' || Array.isArray(obj)) return [`${path}: expected a map`];
    return Object.entries(obj).flatMap(([k, v]) => unknownFields(v, m[1], `${path}.${k}`));
  }
  const model = k8s[type];
  if (!model || typeof model.getAttributeTypeMap !== 'function') return [`${path}: no model for ${type}`];
  if (typeof obj !== 'object' || Array.isArray(obj)) return [`${path}: expected an object (${type})`];
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(obj).flatMap(([k, v]) =>
    fields.has(k) ? unknownFields(v, fields.get(k), `${path}.${k}`) : [`${path}.${k}: unknown field of ${type}`]);
}

function schemaErrors(obj) {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : [null, obj.apiVersion];
  let Model;
  try {
    Model = require(`kubernetes-models/${group ? `${group}/` : ''}${version}/${obj.kind}`)[obj.kind];
  } catch {
    return [`no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`];
  }
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    return String(e.message).split('\n').filter(Boolean);
  }
}

let passed = 0, failed = 0;
for (const file of process.argv.slice(2)) {
  const text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  for (const doc of YAML.parseAllDocuments(text, { uniqueKeys: true })) {
    if (doc.errors.length) {
      failed++;
      console.log(`FAIL ${file}: YAML: ${doc.errors.map((e) => e.message.split('\n')[0]).join('; ')}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;
    const id = `${obj.kind}/${obj.metadata?.name}`;
    const crd = CRDS.get(`${obj.apiVersion} ${obj.kind}`);
    const { metadata, ...rest } = obj;
    const errs = typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string'
      ? ['no apiVersion or kind']
      : crd ? [...crdSchemaErrors(crd.schema, rest), ...unknownFields(metadata, 'V1ObjectMeta', '.metadata'),
        ...(metadata?.name ? [] : ['.metadata.name: required'])]
        : [...schemaErrors(obj), ...unknownFields(obj, modelName(obj.apiVersion, obj.kind), '')];
    if (errs.length) {
      failed++;
      console.log(`FAIL ${file}: ${id}\n  - ${errs.join('\n  - ')}`);
    } else {
      passed++;
      console.log(`ok ${file}: ${id}`);
    }
  }
}
console.log(`validate: ${passed} objects valid, ${failed} invalid`);
process.exit(failed || !passed ? 1 : 0);
