// Test helper: renders templates with the nunjucks that promptfoo uses (tools/promptfoo/node_modules), configured
// as promptfoo configures it (autoescape off), plus the `env` global it adds. One JSON request a line on stdin,
// {"template": ..., "vars": {...}}; one JSON line out: {"out": rendered} or {"error": message}.
const path = require("path");
const readline = require("readline");
const nunjucks = require(path.join(process.argv[2], "nunjucks"));

const env = nunjucks.configure({ autoescape: false });
env.addGlobal("env", process.env);
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  const { template, vars } = JSON.parse(line);
  let reply;
  try {
    reply = { out: env.renderString(template, vars || {}) };
  } catch (e) {
    reply = { error: String(e && e.message) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
