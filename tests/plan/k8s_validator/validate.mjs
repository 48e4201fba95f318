// Validates Kubernetes manifests (multi-document YAML files) offline: core kinds against the
// Kubernetes OpenAPI schemas that the npm package kubernetes-models carries, the MPIJob against the
// Kubeflow MPI operator's CustomResourceDefinition (kubeflow.org_mpijobs.yaml, v2beta1), strictly:
// a field the schema does not know is an error, as with `kubectl apply --validate=strict`.
//
//   node validate.mjs FILE.yaml...      # exit 0 when every document is valid; errors on stderr
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv from "ajv";
import { parseAllDocuments, parse } from "yaml";
import { ConfigMap, PersistentVolumeClaim } from "kubernetes-models/v1";
import { Job } from "kubernetes-models/batch/v1";

const here = dirname(fileURLToPath(import.meta.url));
const coreKinds = {
  "v1/ConfigMap": ConfigMap,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "batch/v1/Job": Job,
};

// Objects with listed properties reject others unless the schema preserves unknown fields.
function strict(schema) {
  if (schema && typeof schema === "object") {
    if (schema.type === "object" && schema.properties && schema.additionalProperties === undefined &&
        !schema["x-kubernetes-preserve-unknown-fields"]) {
      schema.additionalProperties = false;
    }
    for (const value of Object.values(schema)) strict(value);
  }
  return schema;
}

function crdValidator(file, version) {
  const crd = parse(readFileSync(join(here, file), "utf8"));
  const served = crd.spec.versions.find((v) => v.name === version);
  // The CRD's formats (int32, int64, date-time) are ranges and timestamps; types are still checked.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  for (const keyword of ["x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type"]) {
    ajv.addKeyword(keyword);
  }
  return ajv.compile(strict(served.schema.openAPIV3Schema));
}
const mpiJob = crdValidator("kubeflow.org_mpijobs.yaml", "v2beta1");

let failures = 0;
for (const file of process.argv.slice(2)) {
  parseAllDocuments(readFileSync(file, "utf8")).forEach((document, index) => {
    const where = `${file}: document ${index + 1}`;
    if (document.errors.length > 0) {
      console.error(`${where}: not YAML: ${document.errors[0].message}`);
      failures++;
      return;
    }
    const object = document.toJS();
    const key = `${object.apiVersion}/${object.kind}`;
    try {
      if (key === "kubeflow.org/v2beta1/MPIJob") {
        if (!mpiJob(object)) throw new Error(JSON.stringify(mpiJob.errors, null, 1));
      } else if (coreKinds[key]) {
        new coreKinds[key](object).validate();
      } else {
        throw new Error(`no schema for ${key}`);
      }
      console.log(`${where}: ${key} ${object.metadata.name} valid`);
    } catch (error) {
      console.error(`${where}: ${key} invalid: ${error.message}`);
      failures++;
    }
  });
}
process.exit(failures === 0 ? 0 : 1);
