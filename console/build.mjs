// Builds the console into dist/: app.js (one ES module, minified), app.css and index.html
// pointing at both by content hash. Deterministic: the same sources give the same bytes.
// `--out DIR` writes elsewhere (check.sh compares that with dist/); `--tests` instead bundles
// test/*.test.ts into test-out/ for `node --test`.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";

const here = new URL(".", import.meta.url).pathname;

if (process.argv.includes("--tests")) {
  rmSync(`${here}test-out`, { recursive: true, force: true });
  const tests = readdirSync(`${here}test`).filter((f) => f.endsWith(".test.ts"));
  await build({
    entryPoints: tests.map((f) => `${here}test/${f}`),
    outdir: `${here}test-out`,
    bundle: true,
    platform: "node",
    format: "esm",
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
  });
} else {
  const out = process.argv.indexOf("--out");
  const dist = out > 0 ? process.argv[out + 1] : `${here}dist`;
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist);
  const result = await build({
    entryPoints: [`${here}src/main.ts`],
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    legalComments: "none",
    write: false,
    outfile: `${dist}/app.js`,
    logLevel: "warning",
  });
  const js = result.outputFiles[0].contents;
  const css = readFileSync(`${here}src/app.css`);
  const hash = (bytes) => createHash("sha256").update(bytes).digest("hex").slice(0, 16);
  const html = readFileSync(`${here}src/index.html`, "utf8")
    .replace("JS_HASH", hash(js))
    .replace("CSS_HASH", hash(css));
  writeFileSync(`${dist}/app.js`, js);
  writeFileSync(`${dist}/app.css`, css);
  writeFileSync(`${dist}/index.html`, html);
}
