// The page "Try it in your browser": loads Pyodide and scaler's browser client (the wheels its manifest lists, made by
// the server from what its machine has installed), then runs each cell's Python in one shared namespace, ADDRESS and
// STORAGE set from the page's fields, CLIENT_KEY and SERVER_KEY to the texts of the key files picked (None when none
// is). Every file it loads is checked against the digest the manifest gives before it runs (subresource integrity):
// Pyodide comes from this site when its server has a copy, otherwise from jsDelivr's copy of its npm package.
// Its state is told in one line (#status); what stops it (a browser without JSPI, a file it cannot fetch or that is
// not the pinned one, a wheel the server could not make) is told there in one line, with what to do.
// `window.scalerPage.run(code)` runs code as a cell does (the page's test drives it so).

const status = document.getElementById("status");
// A file that has not arrived by then is reported, not waited for.
const LOAD_SECONDS = 300;
// Pyodide started from files already here: if it has not by then, this browser cannot run it.
const START_SECONDS = 120;

function say(text, failed = false) {
  status.textContent = text;
  status.className = failed ? "failed" : "";
}

class PageError extends Error {}

async function whyNot(url, what, error) {
  // Why a checked fetch failed (the browser says only "failed"): fetched again unchecked, it tells which.
  if (error.name === "TimeoutError") return `${what} did not arrive from ${url} within ${LOAD_SECONDS} s`;
  let answer;
  try {
    answer = await fetch(url, { cache: "no-store", signal: AbortSignal.timeout(30_000) });
  } catch {
    return `${what} could not be fetched from ${url}: this browser cannot reach it (offline, or blocked by a proxy or a policy)`;
  }
  if (!answer.ok) return `${what}: ${url} answers HTTP ${answer.status}`;
  return `${what} from ${url} is not the file this page pins (its SHA-384 digest differs)`;
}

async function checked(url, integrity, what) {
  // The bytes at url, checked against integrity; a PageError saying what went wrong otherwise.
  let answer;
  try {
    answer = await fetch(url, { integrity, signal: AbortSignal.timeout(LOAD_SECONDS * 1000) });
  } catch (error) {
    throw new PageError(await whyNot(url, what, error));
  }
  if (!answer.ok) throw new PageError(`${what}: ${url} answers HTTP ${answer.status}`);
  return new Uint8Array(await answer.arrayBuffer());
}

function objectUrl(bytes, type) {
  return URL.createObjectURL(new Blob([bytes], { type }));
}

function script(url, attributes = {}) {
  return new Promise((resolve) => {
    const element = Object.assign(document.createElement("script"), attributes, { src: url });
    element.onload = () => resolve(true);
    element.onerror = () => resolve(false);
    document.head.appendChild(element);
  });
}

function pyodideAdvice(manifest, local) {
  const npm = `the npm package pyodide@${manifest.pyodide} (\`npm pack pyodide@${manifest.pyodide}\`, its package/ folder)`;
  if (local) {
    return `the copy in ${manifest.local_copy} is damaged or of another build: put ${npm} there, or remove it (the page then loads Pyodide from the CDN)`;
  }
  return `let this browser reach cdn.jsdelivr.net, or serve Pyodide from this machine: put ${npm} at ${manifest.local_copy} and start the server again`;
}

async function loadPyodideChecked(manifest) {
  // Pyodide from manifest.pyodide_url, every file checked first. Its script defines _createPyodideModule, which
  // loadPyodide then takes instead of loading the script again; the files loadPyodide fetches itself (the
  // WebAssembly, the standard library, the lock file) it is handed from the checked bytes.
  const local = !/^https?:/.test(manifest.pyodide_url);
  const base = new URL(manifest.pyodide_url, location.href).href;
  const files = {};
  try {
    await Promise.all(
      Object.entries(manifest.pyodide_files).map(async ([name, integrity]) => {
        files[name] = await checked(base + name, integrity, `Pyodide's ${name}`);
      }),
    );
  } catch (error) {
    if (error instanceof PageError) throw new PageError(`${error.message}; ${pyodideAdvice(manifest, local)}`);
    throw error;
  }
  if (!(await script(objectUrl(files["pyodide.asm.js"], "text/javascript")))) {
    throw new PageError(`Pyodide's pyodide.asm.js does not run in this browser: use Chrome or Edge 137 or newer`);
  }
  const { loadPyodide } = await import(objectUrl(files["pyodide.mjs"], "text/javascript"));
  const types = { "pyodide.asm.wasm": "application/wasm", "pyodide-lock.json": "application/json" };
  const plainFetch = globalThis.fetch;
  globalThis.fetch = (resource, options) => {
    const url = String(resource instanceof Request ? resource.url : resource);
    const name = url.startsWith(base) ? url.slice(base.length) : null;
    if (name !== null && name in files) {
      const headers = { "Content-Type": types[name] || "application/octet-stream" };
      return Promise.resolve(new Response(files[name], { headers }));
    }
    return plainFetch(resource, options);
  };
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new PageError(
      `Pyodide did not start within ${START_SECONDS} s in this browser (its console may say why): use Chrome or Edge 137 or newer`,
    )), START_SECONDS * 1000);
  });
  try {
    return await Promise.race([loadPyodide({ indexURL: base }), late]);
  } finally {
    clearTimeout(timer);
    globalThis.fetch = plainFetch;
  }
}

const JSPI =
  "this browser cannot run scaler's client: it needs WebAssembly JSPI, which Chrome and Edge have from " +
  "version 137 (not yet Firefox or Safari); open this page in one of those, or run the same code from " +
  "Python with scaler.Client";

async function load() {
  const started = performance.now();
  if (typeof WebAssembly === "undefined" || typeof WebAssembly.Suspending !== "function") throw new PageError(JSPI);
  const answer = await fetch("wheels/manifest.json");
  if (!answer.ok) {
    throw new PageError(
      `this site has no wheels/manifest.json (HTTP ${answer.status}): serve the page with \`scaler --docs try --serve 8765\``,
    );
  }
  const manifest = await answer.json();
  if (manifest.problem) throw new PageError(manifest.problem);
  const from = /^https?:/.test(manifest.pyodide_url) ? new URL(manifest.pyodide_url).host : "this site";
  say(`Loading Python (Pyodide ${manifest.pyodide} from ${from})...`);
  const boxes = script(manifest.tweetnacl_url, { integrity: manifest.tweetnacl_integrity, crossOrigin: "anonymous" });
  const pyodide = await loadPyodideChecked(manifest);
  const pythonSeconds = (performance.now() - started) / 1000;
  const site = pyodide.runPython("import site; site.getsitepackages()[0]");
  for (const wheel of manifest.wheels) {
    const bytes = await checked(`wheels/${wheel.name}`, wheel.integrity, `the wheel ${wheel.name}`);
    pyodide.unpackArchive(bytes, "wheel", { extractDir: site });
  }
  const fast = await boxes; // CURVE's boxes come from Python where tweetnacl did not load (slower)
  const facts = await pyodide.runPythonAsync(`
import platform
from pyodide.ffi import can_run_sync
import scaler.browser
(platform.python_version(), can_run_sync())
`);
  const [python, blocking] = facts.toJs();
  facts.destroy();
  if (!blocking) throw new PageError(JSPI);
  const clientSeconds = (performance.now() - started) / 1000 - pythonSeconds;
  const mismatch =
    manifest.server_python && manifest.server_python !== manifest.python
      ? ` This site is served by Python ${manifest.server_python}: a cluster started from that environment refuses the page.`
      : "";
  say(
    `Ready: Python ${python} (Pyodide ${manifest.pyodide}; loaded in ${pythonSeconds.toFixed(1)} s, the client in ` +
      `${clientSeconds.toFixed(1)} s${fast ? "" : "; CURVE in Python: tweetnacl did not load"}). ` +
      `The cluster must run Python ${manifest.python}.${mismatch}`,
  );
  return pyodide;
}

// A page opened from a file (not served) has its status said by index.html already: nothing loads.
const ready =
  location.protocol === "file:"
    ? Promise.reject(new PageError(status.textContent))
    : load().catch((error) => {
        say(`The client could not be loaded: ${error.message || error}`, true);
        throw error;
      });

async function picked(id) {
  const file = document.getElementById(id).files[0];
  return file ? await file.text() : null;
}

async function run(code) {
  let pyodide;
  try {
    pyodide = await ready;
  } catch (error) {
    return { output: "", error: `the client is not loaded: ${error.message || error}` };
  }
  const lines = [];
  pyodide.setStdout({ batched: (text) => lines.push(text) });
  pyodide.setStderr({ batched: (text) => lines.push(text) });
  pyodide.globals.set("ADDRESS", document.getElementById("address").value.trim());
  pyodide.globals.set("STORAGE", document.getElementById("storage").value.trim() || null);
  pyodide.globals.set("CLIENT_KEY", await picked("client-key"));
  pyodide.globals.set("SERVER_KEY", await picked("server-key"));
  try {
    await pyodide.runPythonAsync(code);
    return { output: lines.join("\n"), error: null };
  } catch (error) {
    console.error(error);
    const message = String(error.message || error).trim().split("\n");
    return { output: lines.join("\n"), error: message[message.length - 1] };
  }
}

for (const cell of document.querySelectorAll(".cell")) {
  const button = cell.querySelector("button");
  const output = cell.querySelector(".output");
  button.addEventListener("click", async () => {
    button.disabled = true;
    output.className = "output";
    output.textContent = "running...";
    const result = await run(cell.querySelector("textarea").value);
    output.textContent = [result.output, result.error].filter(Boolean).join("\n");
    if (result.error) output.className = "output failed";
    button.disabled = false;
  });
}

window.scalerPage = { ready: ready.then(() => true), run };
