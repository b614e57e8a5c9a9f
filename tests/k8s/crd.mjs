// Validate a custom resource against its CRD's OpenAPI v3 schema, as the apiserver does with
// strict field validation (kubectl's default): the structural-schema rules below, unknown fields
// refused. The schemas are vendored (crds/*/SOURCE says from where): nothing is fetched.
//
// A schema keyword this file does not model is an error, never a silent pass: a newer vendored
// schema that uses one fails here until it is modelled.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODELLED = new Set(['type', 'properties', 'required', 'items', 'additionalProperties', 'enum', 'format', 'pattern',
  'minimum', 'maximum', 'minLength', 'maxLength', 'minItems', 'maxItems', 'anyOf', 'nullable', 'default', 'description',
  'x-kubernetes-int-or-string', 'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys', 'x-kubernetes-map-type']);
const INT32 = [-(2 ** 31), 2 ** 31 - 1];

// Every vendored CRD: "group/version Kind" -> {scope, schema}.
export function loadCrds(dir = path.join(HERE, 'crds')) {
  const crds = new Map();
  for (const sub of fs.readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory())) {
    for (const f of fs.readdirSync(path.join(dir, sub.name)).filter((n) => n.endsWith('.json'))) {
      const crd = JSON.parse(fs.readFileSync(path.join(dir, sub.name, f), 'utf8'));
      crds.set(`${crd.group}/${crd.version} ${crd.kind}`, crd);
    }
  }
  return crds;
}

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;   // object, string, boolean
}

function typeOk(schema, v) {
  const t = typeOf(v);
  if (t === 'null') return !!schema.nullable;
  if (schema['x-kubernetes-int-or-string']) return t === 'integer' || t === 'string';
  if (schema.type === 'number') return t === 'number' || t === 'integer';
  return schema.type === undefined || schema.type === t;
}

// The errors of value v against schema s, at path p. An object's fields the schema does not
// declare are unknown (the apiserver would prune them; with strict validation it refuses them),
// unless the schema preserves unknown fields. The root's metadata is the caller's: the CRD
// schema says only "object", and the apiserver checks it as an ObjectMeta.
export function schemaErrors(s, v, p = '') {
  const errs = [];
  for (const k of Object.keys(s)) if (!MODELLED.has(k)) errs.push(`${p}: schema keyword ${k} is not modelled by crd.mjs`);
  if (!typeOk(s, v)) return [...errs, `${p}: expected ${s['x-kubernetes-int-or-string'] ? 'an integer or a string' : s.type}, got ${typeOf(v)}`];
  if (v === null) return errs;
  if (s.enum && !s.enum.includes(v)) errs.push(`${p}: ${JSON.stringify(v)} is not one of ${JSON.stringify(s.enum)}`);
  if (typeof v === 'number') {
    if (s.minimum !== undefined && v < s.minimum) errs.push(`${p}: ${v} is below the minimum ${s.minimum}`);
    if (s.maximum !== undefined && v > s.maximum) errs.push(`${p}: ${v} is above the maximum ${s.maximum}`);
    if (s.format === 'int32' && (v < INT32[0] || v > INT32[1])) errs.push(`${p}: ${v} does not fit an int32`);
  }
  if (typeof v === 'string') {
    if (s.minLength !== undefined && v.length < s.minLength) errs.push(`${p}: shorter than ${s.minLength}`);
    if (s.maxLength !== undefined && v.length > s.maxLength) errs.push(`${p}: longer than ${s.maxLength}`);
    if (s.pattern && !new RegExp(s.pattern, 'u').test(v)) errs.push(`${p}: ${JSON.stringify(v)} does not match ${s.pattern}`);
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) errs.push(`${p}: fewer than ${s.minItems} items`);
    if (s.maxItems !== undefined && v.length > s.maxItems) errs.push(`${p}: more than ${s.maxItems} items`);
    if (s.items) v.forEach((x, i) => errs.push(...schemaErrors(s.items, x, `${p}[${i}]`)));
    const listType = s['x-kubernetes-list-type'];
    if (listType === 'set' || listType === 'map') {
      const keyOf = listType === 'set' ? (x) => JSON.stringify(x)
        : (x) => JSON.stringify(s['x-kubernetes-list-map-keys'].map((k) => x?.[k]));
      const seen = new Set();
      for (const x of v) {
        const key = keyOf(x);
        if (seen.has(key)) errs.push(`${p}: duplicate ${listType === 'set' ? 'item' : 'key'} ${key} (x-kubernetes-list-type ${listType})`);
        seen.add(key);
      }
    }
  }
  if (typeOf(v) === 'object' && !s['x-kubernetes-int-or-string']) {
    for (const r of s.required || []) if (!(r in v)) errs.push(`${p}: required field ${r} is missing`);
    for (const [k, x] of Object.entries(v)) {
      if (s.properties && k in s.properties) errs.push(...schemaErrors(s.properties[k], x, `${p}.${k}`));
      else if (s.additionalProperties && typeof s.additionalProperties === 'object') errs.push(...schemaErrors(s.additionalProperties, x, `${p}.${k}`));
      else if (!s['x-kubernetes-preserve-unknown-fields']) errs.push(`${p}.${k}: unknown field`);
    }
  }
  if (s.anyOf && !s['x-kubernetes-int-or-string'] && !s.anyOf.some((a) => schemaErrors(a, v, p).length === 0)) errs.push(`${p}: matches none of anyOf`);
  return errs;
}
