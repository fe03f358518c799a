// A copy of the page with only the files it loads, to host as a static site:
// `npm run build` (or `node build.mjs [OUT]`) writes web/dist (or OUT). node_modules holds
// some 150 MB; the page loads three of its files (about 14 MB, nearly all of it the WASM
// build of onnxruntime), the ones copied below, at the paths src/policy.js names.

import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const WEB = dirname(fileURLToPath(import.meta.url));
const ORT = "node_modules/onnxruntime-web/dist";
const FILES = [
  "index.html",
  "style.css",
  "src",
  // ort.wasm.min.mjs is what src/policy.js imports: the WASM execution provider alone. On one
  // thread it loads this module and binary (the same names whether or not threads are on).
  `${ORT}/ort.wasm.min.mjs`,
  `${ORT}/ort-wasm-simd-threaded.mjs`,
  `${ORT}/ort-wasm-simd-threaded.wasm`,
];

const out = process.argv[2] ?? join(WEB, "dist");
const missing = FILES.filter((file) => !existsSync(join(WEB, file)));
if (missing.length) {
  console.error(`cannot build: ${missing.join(", ")} missing in ${WEB} (run \`npm ci\` there first)`);
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
let bytes = 0;
for (const file of FILES) {
  mkdirSync(dirname(join(out, file)), { recursive: true });
  cpSync(join(WEB, file), join(out, file), { recursive: true });
  bytes += size(join(WEB, file));
}
console.log(`${out}: ${FILES.length} entries, ${(bytes / 1e6).toFixed(1)} MB`);

// Bytes of a file, or of every file under a folder.
function size(path) {
  if (!statSync(path).isDirectory()) return statSync(path).size;
  return readdirSync(path, { recursive: true }).reduce((total, name) => total + size(join(path, name)), 0);
}
