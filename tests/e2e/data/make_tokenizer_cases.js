// Writes tokenizer_cases.json: test strings and the ids that Hugging Face
// `tokenizers` (npm package tokenizers@0.23.2, the library's own Rust core)
// gives them with the coder models' tokenizer.json, without added BOS/EOS.
//
//   npm install tokenizers@0.23.2
//   node make_tokenizer_cases.js OUT_DIR_OF_TRAIN_PY/tokenizer.json > tokenizer_cases.json
const { Tokenizer } = require('tokenizers');

const SYSTEM = 'You are a helpful Python coding assistant.';
const chatml = (user, assistant) =>
  `<|im_start|>system\n${SYSTEM}<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n` +
  `<|im_start|>assistant\n${assistant}`;

const cases = [
  '',
  ' ',
  '\n\n\n',
  'def add(a, b):\n    return a + b\n',
  'class Stack:\n    """A LIFO stack."""\n\n    def __init__(self):\n        self._items = []\n\n' +
    '    def push(self, item) -> None:\n        self._items.append(item)\n',
  'import os, sys\nfrom typing import Optional, List\n\n\n@functools.lru_cache(maxsize=128)\n' +
    'def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n',
  'x = [i ** 2 for i in range(10_000) if i % 3 == 0]  # squares\n',
  'print(f"{name!r:>10} = {value:.3f}")\n',
  "s = 'it''s'; t = r'\\d+\\s*' ; u = b'\\x00\\xff'\n",
  'if __name__ == "__main__":\n\tmain()\r\n',
  'async def fetch(session, url):\n    async with session.get(url) as r:\n        return await r.text()\n',
  'try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise ValueError("bad") from e\nfinally:\n    pass\n',
  'λ = lambda x: x  # Greek identifier\nnaïve = "café"\n',
  'cafe\u0301 vs caf\u00e9 (NFC)',
  '数据 = {"键": "值", "emoji": "🐍✨"}',
  '    \n        \n',
  'a=1;b=2;c=a+b;print(c)',
  '0x1F, 0o17, 0b1010, 3.14e-10, 1_000_000j',
  "I'm sure they'll say it's done, we've seen he'd",
  '<|im_start|>user\nhi<|im_end|>\n',
  '<|endoftext|><|endoftext|>',
  '<think>\nThe user wants a sorted list.\n</think>\n\n```python\nsorted(xs)\n```',
  '<think>\n\n</think>\n\n',
  'a<|im_end|>b<think>c</think>d',
  '<|im_start|', // almost a special token
  chatml('Write a Python function that returns the maximum of a list.', ''),
  chatml('Python: Return the sum of the squares of a list of numbers.', '<think>\n\n</think>\n\n'),
  chatml('Implement a function `merge`: Merge two sorted lists.',
    '<think>\nPlan: write `merge(a, b)` so that it merges two sorted lists.\n</think>\n\n' +
    '```python\ndef merge(a, b):\n    out = []\n    while a and b:\n        out.append((a if a[0] < b[0] else b).pop(0))\n' +
    '    return out + a + b\n```<|im_end|>\n'),
];

(async () => {
  const tok = Tokenizer.fromFile(process.argv[2]);
  const out = [];
  for (const text of cases) {
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    out.push({ text, ids: enc.getIds() });
  }
  process.stdout.write('[\n' + out.map((c) => JSON.stringify(c)).join(',\n') + '\n]\n');
})();
