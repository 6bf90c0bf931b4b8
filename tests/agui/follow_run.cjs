// Follow a run's AG-UI stream with the official client (@ag-ui/client's HttpAgent, as
// any AG-UI front end would) and print every event it accepts as one JSON line.
// Usage: node follow_run.cjs URL   (the API token in LOOP_TOKEN)
// Exit status 0 when the stream ended and the client accepted every event; 1 otherwise.
const { HttpAgent } = require("@ag-ui/client");

async function main() {
  const agent = new HttpAgent({
    url: process.argv[2],
    headers: { Authorization: `Bearer ${process.env.LOOP_TOKEN}` },
  });
  await agent.runAgent(
    {},
    {
      onEvent({ event }) {
        process.stdout.write(JSON.stringify(event) + "\n");
      },
    },
  );
  process.stdout.write(JSON.stringify({ type: "CLIENT_DONE", state: agent.state }) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
