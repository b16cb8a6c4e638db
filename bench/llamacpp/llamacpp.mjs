// llama.cpp on the same GGUF and the same machine, for tools/bench.sh
// --llamacpp: drives the llama.cpp that the node-llama-cpp package ships
// prebuilt (its CPU backend picks the variant for this CPU at load) through
// that package's API, and prints the rows tw-bench-engine prints for
// prefill of 128 and 512 tokens and decode of 128 tokens, as JSON lines
// (suite "llamacpp"). Each metric is the best of --reps runs.
//
//   node llamacpp.mjs --model FILE.gguf [--label NAME] [--threads N] [--reps N]
//                     [--engine NAME]   (what to call this llama.cpp in the rows)
//
// ES modules resolve packages from the script's own folder, so
// tools/bench.sh copies this file next to the node_modules it installs.
import {getLlama} from "node-llama-cpp";

function parseArgs(argv) {
    const a = {model: null, label: null, threads: 2, reps: 2, engine: "node-llama-cpp"};
    for (let i = 2; i < argv.length; i++) {
        const k = argv[i], v = argv[i + 1];
        if (k === "--model" && v) a.model = argv[++i];
        else if (k === "--label" && v) a.label = argv[++i];
        else if (k === "--threads" && v) a.threads = Number(argv[++i]);
        else if (k === "--reps" && v) a.reps = Number(argv[++i]);
        else if (k === "--engine" && v) a.engine = argv[++i];
        else throw new Error(`llamacpp.mjs: unknown or incomplete argument ${k}`);
    }
    if (!a.model) throw new Error("llamacpp.mjs: --model FILE.gguf is required");
    if (!(Number.isInteger(a.threads) && a.threads >= 1 && a.threads <= 256))
        throw new Error("llamacpp.mjs: --threads takes 1..256");
    if (!(Number.isInteger(a.reps) && a.reps >= 1 && a.reps <= 20))
        throw new Error("llamacpp.mjs: --reps takes 1..20");
    a.label = a.label || a.model;
    return a;
}

// Prompt tokens that every vocabulary of the bench models holds; the
// weights are random, so which ids does not matter, only how many.
const promptTokens = (n) => Array.from({length: n}, (_, i) => 100 + (i * 37) % 5000);

async function main() {
    const args = parseArgs(process.argv);
    const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
    const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
    const context = await model.createContext({
        contextSize: 1024, batchSize: 512, sequences: 1, threads: args.threads});
    const seq = context.getSequence();
    const now = () => performance.now() / 1000;

    async function prefill(n) {
        await seq.clearHistory();
        const t0 = now();
        await seq.evaluateWithoutGeneratingNewTokens(promptTokens(n));
        return n / (now() - t0);
    }
    // One forward pass per token after an 8-token prompt, as tw-bench-engine
    // decodes; the token fed back is fixed, which costs the same as a
    // sampled one.
    async function decode(n) {
        await seq.clearHistory();
        await seq.evaluateWithoutGeneratingNewTokens(promptTokens(8));
        const t0 = now();
        for (let i = 0; i < n; i++)
            await seq.evaluateWithoutGeneratingNewTokens([200 + i]);
        return n / (now() - t0);
    }

    await prefill(32); // warm-up: pages, repacked weights, thread pool
    const best = {prefill_128: 0, prefill_512: 0, decode_128: 0};
    for (let r = 0; r < args.reps; r++) {
        best.prefill_128 = Math.max(best.prefill_128, await prefill(128));
        best.prefill_512 = Math.max(best.prefill_512, await prefill(512));
        best.decode_128 = Math.max(best.decode_128, await decode(128));
    }
    const extra = {threads: args.threads, reps: args.reps, summary: "the best of",
                   system_info: llama.systemInfo.trim(),
                   engine: `llama.cpp prebuilt in ${args.engine}`};
    for (const [name, value] of Object.entries(best)) {
        console.log(JSON.stringify({suite: "llamacpp", name, model: args.label, value,
                                    unit: "tok/s", extra}));
        process.stderr.write(`[llamacpp] ${args.label}: ${name.replace("_", " ")}: ` +
                             `${value.toFixed(1)} tok/s\n`);
    }
    await context.dispose();
    await model.dispose();
}

main().then(() => process.exit(0), (e) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
});
