// The page "Try it in your browser": loads Pyodide and scaler's browser client (the wheels its manifest lists), then
// runs each cell's Python in one shared namespace, ADDRESS and STORAGE set from the page's fields, CLIENT_KEY and
// SERVER_KEY to the texts of the key files picked (None when none is). Its state is told in
// one line (#status); a browser that cannot run the client is told what it lacks and what to do.
// `window.scalerPage.run(code)` runs code as a cell does (the page's test drives it so).

const status = document.getElementById("status");

function say(text, failed = false) {
  status.textContent = text;
  status.className = failed ? "failed" : "";
}

function script(url) {
  return new Promise((resolve) => {
    const element = document.createElement("script");
    element.src = url;
    element.onload = () => resolve(true);
    element.onerror = () => resolve(false); // CURVE's boxes then come from Python (slower)
    document.head.appendChild(element);
  });
}

async function load() {
  const started = performance.now();
  const manifest = await (await fetch("wheels/manifest.json")).json();
  await script(
    manifest.local_pyodide ? "nacl-fast.min.js" : `https://cdn.jsdelivr.net/npm/tweetnacl@${manifest.tweetnacl}/nacl-fast.min.js`,
  );
  const base = manifest.local_pyodide
    ? new URL("pyodide/", location.href).href
    : `https://cdn.jsdelivr.net/pyodide/v${manifest.pyodide}/full/`;
  let pyodide;
  try {
    const { loadPyodide } = await import(base + "pyodide.mjs");
    pyodide = await loadPyodide({ indexURL: base });
  } catch (error) {
    throw new Error(`Pyodide could not be loaded from ${base} (${error}): is this browser offline, or blocking it?`);
  }
  if (manifest.packages.length) await pyodide.loadPackage(manifest.packages);
  const pythonSeconds = (performance.now() - started) / 1000;
  const site = pyodide.runPython("import site; site.getsitepackages()[0]");
  for (const name of manifest.wheels) {
    const answer = await fetch(`wheels/${name}`);
    if (!answer.ok) throw new Error(`the wheel ${name} is missing from this site (HTTP ${answer.status})`);
    pyodide.unpackArchive(await answer.arrayBuffer(), "wheel", { extractDir: site });
  }
  const facts = await pyodide.runPythonAsync(`
import platform
from pyodide.ffi import can_run_sync
import scaler.browser
(platform.python_version(), can_run_sync())
`);
  const [python, blocking] = facts.toJs();
  facts.destroy();
  if (!blocking) {
    throw new Error(
      "this browser cannot run scaler's client: it needs WebAssembly JSPI, which Chrome and Edge have from " +
        "version 137 (not yet Firefox or Safari); open this page in one of those, or run the same code from " +
        "Python with scaler.Client",
    );
  }
  const clientSeconds = (performance.now() - started) / 1000 - pythonSeconds;
  say(
    `Ready: Python ${python} (Pyodide ${manifest.pyodide}; loaded in ${pythonSeconds.toFixed(1)} s, the client in ` +
      `${clientSeconds.toFixed(1)} s). The cluster must run Python ${manifest.python}.`,
  );
  return pyodide;
}

const ready = load().catch((error) => {
  say(`The client could not be loaded: ${error.message || error}`, true);
  throw error;
});

async function picked(id) {
  const file = document.getElementById(id).files[0];
  return file ? await file.text() : null;
}

async function run(code) {
  const pyodide = await ready;
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
