// Evaluate a ValidatingAdmissionPolicy offline, as the apiserver would decide an admission request.
//
//   node admission.mjs < REQUEST.json
//
// REQUEST: {"policy": VAP, "binding": its binding, "params": the param object or null,
//           "namespaces": {NAME: labels}, "cases": [{"name", "operation", "namespace",
//           "subResource", "object", "oldObject"}]}
// Answer (stdout, JSON): [{"name", "matched", "admitted", "failures": [{"index", "message",
//           "error"}]}] -- one per case; a failure with "error" is an expression that did not
//           evaluate (the apiserver refuses those too: failurePolicy Fail), one without is a
//           validation that evaluated to false; "variableErrors" lists the variables that did not
//           evaluate.
//
// The evaluator is @bufbuild/cel (pinned in package-lock.json) with its standard library only:
// no Kubernetes CEL library is registered, so an expression using one fails here. What this
// models of the apiserver, and nothing more:
//   * matchConstraints.resourceRules (group, version, operation, resource/subresource) and the
//     binding's matchResources.namespaceSelector (matchLabels) decide whether a case is checked;
//   * variables are evaluated in order, each seeing the earlier ones as `variables.NAME`;
//   * `object`, `oldObject` (null on CREATE), `params`, `request`, `namespaceObject` are bound;
//     JSON integers are CEL ints (the schemas' integer fields), objects are CEL maps;
//   * an object that is not a map in the API schema (anything but labels, annotations, a
//     ConfigMap's data, resource lists, nodeSelector) cannot be iterated: the apiserver's type
//     checker refuses `obj.all(k, ...)` on an object type, and so does this.
import fs from 'node:fs';
import { celEnv, isCelError, parse, plan } from '@bufbuild/cel';

// Fields whose value is a map in the Kubernetes API (additionalProperties), iterable in CEL.
const MAP_FIELDS = new Set(['labels', 'annotations', 'data', 'binaryData', 'nodeSelector', 'limits', 'requests',
  'overhead']);

class ObjectType extends Map {
  keys() { throw new Error('iteration over an object type (the apiserver\'s CEL refuses it: not a map)'); }
  [Symbol.iterator]() { return this.keys(); }
}

function toCel(value, field) {
  if (Array.isArray(value)) return value.map((v) => toCel(v, null));
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return Number.isInteger(value) ? BigInt(value) : value;
  if (typeof value === 'object') {
    const entries = Object.entries(value).map(([k, v]) => [k, toCel(v, k)]);
    return MAP_FIELDS.has(field) ? new Map(entries) : new ObjectType(entries);
  }
  return value;
}

function selects(selector, labels) {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector.matchLabels || {})) if ((labels || {})[k] !== v) return false;
  if ((selector.matchExpressions || []).length) throw new Error('matchExpressions: not modelled here');
  return true;
}

function ruleMatches(rule, c) {
  const resource = c.subResource ? `pods/${c.subResource}` : 'pods';
  const any = (list, v) => (list || []).includes('*') || (list || []).includes(v);
  return any(rule.apiGroups, '') && any(rule.apiVersions, 'v1') && any(rule.operations, c.operation)
    && ((rule.resources || []).includes(resource) || (rule.resources || []).includes('*')
      || (c.subResource && (rule.resources || []).includes('pods/*')));
}

const env = celEnv();
function compile(expression) {
  try {
    return plan(env, parse(expression));
  } catch (e) {
    return () => e;
  }
}

const request = JSON.parse(fs.readFileSync(0, 'utf8'));
const spec = request.policy.spec;
// What this does not model is refused, not ignored: a policy using it would be judged wrongly.
for (const field of ['matchConditions', 'auditAnnotations']) {
  if (spec[field]) throw new Error(`admission.mjs does not model spec.${field}`);
}
if (spec.failurePolicy !== 'Fail') throw new Error('admission.mjs models failurePolicy Fail only (an error refuses)');
if ((spec.matchConstraints.namespaceSelector || spec.matchConstraints.objectSelector
     || spec.matchConstraints.excludeResourceRules)) {
  throw new Error('admission.mjs does not model matchConstraints beyond resourceRules');
}
const variables = (spec.variables || []).map((v) => ({ name: v.name, run: compile(v.expression) }));
const validations = spec.validations.map((v) => ({ message: v.message, run: compile(v.expression) }));

const answers = request.cases.map((c) => {
  const nsLabels = request.namespaces[c.namespace] || {};
  const matched = spec.matchConstraints.resourceRules.some((r) => ruleMatches(r, c))
    && selects(request.binding.spec.matchResources?.namespaceSelector, nsLabels);
  const failures = [], variableErrors = [];
  if (matched) {
    const bindings = {
      object: toCel(c.object, null),
      oldObject: c.operation === 'UPDATE' ? toCel(c.oldObject, null) : null,
      params: toCel(request.params, null),
      namespaceObject: toCel({ metadata: { name: c.namespace, labels: nsLabels } }, null),
      request: toCel({ operation: c.operation, namespace: c.namespace, subResource: c.subResource || '' }, null),
    };
    const vars = new Map();
    for (const v of variables) {
      const value = v.run({ ...bindings, variables: vars });
      if (isCelError(value) || value instanceof Error) variableErrors.push(`${v.name}: ${value.message}`);
      else vars.set(v.name, value);   // an error: a validation referring to it errs
    }
    validations.forEach((v, index) => {
      const r = v.run({ ...bindings, variables: vars });
      if (isCelError(r) || r instanceof Error) failures.push({ index, message: v.message, error: String(r.message || r) });
      else if (r !== true) failures.push({ index, message: v.message });
    });
  }
  return { name: c.name, matched, admitted: failures.length === 0, failures, variableErrors };
});
console.log(JSON.stringify(answers));
