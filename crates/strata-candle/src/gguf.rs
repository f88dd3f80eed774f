//! Local text generation from GGUF files through candle's quantized llama and qwen2 models:
//! the tokenizer built from the file's metadata, the ChatML chat template both supported
//! models use, greedy decoding, a token limit and a deadline.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use candle_core::quantized::gguf_file;
use candle_core::quantized::tokenizer::TokenizerFromGguf;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};
use strata_core::{GenerateError, GenerateRequest, Generation, Generator, Role};
use tokenizers::Tokenizer;

use crate::EngineError;

/// Prompt tokens per forward pass.
const PREFILL_CHUNK: usize = 512;

/// Which implementation runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Implementation {
    /// strata-candle's decoder with 8-bit integer linear layers: the fast one.
    #[default]
    Int8,
    /// candle-transformers' quantized llama and qwen2, on the GGUF blocks as they are: the
    /// reference.
    Candle,
}

enum Model {
    Llama(quantized_llama::ModelWeights),
    Qwen2(quantized_qwen2::ModelWeights),
    Int8(Box<crate::llm::Decoder>),
}

impl Model {
    /// The logits after `ids` at positions `pos..`.
    fn forward(&mut self, ids: &[u32], pos: usize, device: &Device) -> candle_core::Result<Vec<f32>> {
        let input = || Tensor::new(ids, device)?.unsqueeze(0);
        match self {
            Model::Llama(m) => m.forward(&input()?, pos)?.squeeze(0)?.to_vec1(),
            Model::Qwen2(m) => m.forward(&input()?, pos)?.squeeze(0)?.to_vec1(),
            Model::Int8(m) => m.forward(ids, pos),
        }
    }

    fn clear(&mut self) {
        match self {
            Model::Llama(m) => m.clear_kv_cache(),
            Model::Qwen2(m) => m.clear_kv_cache(),
            Model::Int8(m) => m.clear(),
        }
    }
}

/// The model and what its key-value cache holds.
struct Engine {
    model: Model,
    /// The prompt whose positions the cache holds as its prefill computed them (the tokens
    /// generated after it are left out: a step computes them otherwise); empty when unknown.
    prompt: Vec<u32>,
}

impl Engine {
    /// Empties the cache and prepares it for `prompt`, keeping the positions an earlier prompt
    /// shares with it; returns how many it kept. Only whole prefill chunks are kept, so the
    /// rest is chunked as a fresh run chunks it and every number is the one a fresh run gives:
    /// an answer never depends on what was asked before it. candle's models cannot cut their
    /// cache short and keep nothing.
    fn prepare(&mut self, prompt: &[u32]) -> usize {
        let shared = self.prompt.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        // At least the last token runs: its logits are the first answer token's.
        let keep = shared.min(prompt.len().saturating_sub(1)) / PREFILL_CHUNK * PREFILL_CHUNK;
        self.prompt.clear();
        match &mut self.model {
            Model::Int8(m) if keep > 0 => {
                m.truncate(keep);
                keep
            }
            model => {
                model.clear();
                0
            }
        }
    }
}

/// A chat model in a GGUF file. Calls are serialised: the model holds one KV cache, and a
/// prompt that begins as the previous one did runs from where they part (in whole chunks of
/// [`PREFILL_CHUNK`] tokens; see [`Generation::reused_tokens`]).
pub struct GgufGenerator {
    model_id: String,
    path: PathBuf,
    tokenizer: Tokenizer,
    model: Mutex<Engine>,
    stops: Vec<u32>,
    context_length: usize,
    device: Device,
}

impl std::fmt::Debug for GgufGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufGenerator").field("model_id", &self.model_id).field("path", &self.path).finish()
    }
}

/// Tokens and time of one generation, for benchmarks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub prompt_tokens: usize,
    /// Of those, the ones the cache held from the previous prompt.
    pub reused_tokens: usize,
    pub prompt_seconds: f64,
    pub generated_tokens: usize,
    pub generate_seconds: f64,
}

impl GgufGenerator {
    /// The longest prompt and reply together, from the file's metadata.
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// Loads a GGUF file of the llama or qwen2 architecture. `model_id` names the model in
    /// caches and results.
    pub fn load(path: &Path, model_id: &str) -> Result<GgufGenerator, EngineError> {
        GgufGenerator::load_with(path, model_id, Implementation::default())
    }

    /// As [`GgufGenerator::load`], with the implementation chosen.
    pub fn load_with(
        path: &Path,
        model_id: &str,
        implementation: Implementation,
    ) -> Result<GgufGenerator, EngineError> {
        let err = |message: String| EngineError::Load { path: path.to_path_buf(), message };
        let mut file = std::fs::File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| err(format!("not a GGUF file: {e}")))?;
        let meta_str = |key: &str| content.metadata.get(key).and_then(|v| v.to_string().ok()).cloned();
        let arch = meta_str("general.architecture").ok_or_else(|| err("no general.architecture".into()))?;
        // Both supported models speak ChatML; a file with another template would be prompted
        // wrongly, so it is refused rather than run. The template is read, never executed.
        let template = meta_str("tokenizer.chat_template").unwrap_or_default();
        if !template.contains("<|im_start|>") {
            return Err(err("the chat template is not ChatML (<|im_start|>); only ChatML models are supported".into()));
        }
        let context_length =
            content.metadata.get(&format!("{arch}.context_length")).and_then(|v| v.to_u32().ok()).unwrap_or(2048)
                as usize;
        let mut tokenizer = Tokenizer::from_gguf(&content).map_err(|e| err(format!("tokenizer: {e}")))?;
        if meta_str("tokenizer.ggml.pre").as_deref() == Some("smollm") {
            // candle's loader treats `smollm` as plain GPT-2, which adds a space before the
            // text; SmolLM2's own tokenizer splits digits one by one and adds no space.
            use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
            use tokenizers::pre_tokenizers::{byte_level::ByteLevel, digits::Digits, sequence::Sequence};
            let pre = Sequence::new(vec![Digits::new(true).into(), ByteLevel::new(false, true, true).into()]);
            tokenizer.with_pre_tokenizer(Some(pre));
            tokenizer.with_decoder(Some(ByteLevelDecoder::new(false, true, true)));
        }
        let device = Device::Cpu;
        let model = match (implementation, arch.as_str()) {
            (Implementation::Int8, "llama" | "qwen2") => Model::Int8(Box::new(
                crate::llm::Decoder::load(&content, &mut file, &arch, context_length)
                    .map_err(|e| err(e.to_string()))?,
            )),
            (_, "llama") => Model::Llama(
                quantized_llama::ModelWeights::from_gguf(content, &mut file, &device)
                    .map_err(|e| err(e.to_string()))?,
            ),
            (_, "qwen2") => Model::Qwen2(
                quantized_qwen2::ModelWeights::from_gguf(content, &mut file, &device)
                    .map_err(|e| err(e.to_string()))?,
            ),
            (_, other) => return Err(err(format!("architecture {other} is not supported (llama, qwen2)"))),
        };
        let stops: Vec<u32> = ["<|im_end|>", "<|endoftext|>"].iter().filter_map(|t| tokenizer.token_to_id(t)).collect();
        if stops.is_empty() {
            return Err(err("no <|im_end|> or <|endoftext|> token".into()));
        }
        // The two backends round differently; caches must not mix their answers.
        let model_id = match implementation {
            Implementation::Int8 => model_id.to_string(),
            Implementation::Candle => format!("{model_id}+candle"),
        };
        Ok(GgufGenerator {
            model_id,
            path: path.to_path_buf(),
            tokenizer,
            model: Mutex::new(Engine { model, prompt: Vec::new() }),
            stops,
            context_length,
            device,
        })
    }

    /// The prompt in ChatML, ending with the assistant's turn opened.
    pub fn render(messages: &[strata_core::ChatMessage]) -> String {
        let mut out = String::new();
        for m in messages {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            out.push_str(&format!("<|im_start|>{role}\n{}<|im_end|>\n", m.content));
        }
        out.push_str("<|im_start|>assistant\n");
        out
    }

    /// Counts tokens as this model sees them: its own tokenizer and [`GgufGenerator::render`]'s
    /// framing, so that a budget counted with it is the prompt the model is given.
    pub fn token_counter(&self) -> ChatMlCounter {
        let mut counter = ChatMlCounter { name: self.model_id.clone(), tokenizer: self.tokenizer.clone(), priming: 0 };
        // `<|im_start|>`, the role's tokens (SmolLM2 splits "assistant" in two) and the newline.
        counter.priming = 2 + strata_core::TokenCounter::count(&counter, Role::Assistant.as_str());
        counter
    }

    /// The token ids of a rendered prompt.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, GenerateError> {
        let enc = self.tokenizer.encode(text, false).map_err(|e| self.backend(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    fn backend(&self, message: String) -> GenerateError {
        GenerateError::Backend { model: self.model_id.clone(), message }
    }

    /// Generates greedily from token ids, with the time spent on the prompt and on the rest.
    pub fn generate_ids(
        &self,
        prompt: &[u32],
        max_tokens: usize,
        deadline: Option<std::time::Duration>,
    ) -> Result<(Vec<u32>, Timing), GenerateError> {
        self.decode_greedy(prompt, max_tokens, deadline, true, &mut |_| {})
    }

    /// The logits for the token after `prompt`, for comparing implementations.
    pub fn next_logits(&self, prompt: &[u32]) -> Result<Vec<f32>, GenerateError> {
        let mut engine = self.model.lock().map_err(|_| self.backend("a previous generation panicked".into()))?;
        engine.prepare(&[]);
        engine.model.forward(prompt, 0, &self.device).map_err(|e| self.backend(e.to_string()))
    }

    /// The same logits by the path a generated token takes: all but the last token as a
    /// prompt, then the last one as a single step (which reads the 4-bit copies of layers
    /// that were 4-bit in the file).
    pub fn next_logits_stepped(&self, prompt: &[u32]) -> Result<Vec<f32>, GenerateError> {
        let Some((&last, head)) = prompt.split_last() else {
            return Err(self.backend("empty prompt".into()));
        };
        let mut engine = self.model.lock().map_err(|_| self.backend("a previous generation panicked".into()))?;
        engine.prepare(&[]);
        if !head.is_empty() {
            engine.model.forward(head, 0, &self.device).map_err(|e| self.backend(e.to_string()))?;
        }
        engine.model.forward(&[last], head.len(), &self.device).map_err(|e| self.backend(e.to_string()))
    }

    /// Exactly `n` tokens after the prompt, end-of-turn tokens or not: what benchmarks time.
    pub fn time_generation(&self, prompt: &[u32], n: usize) -> Result<(Vec<u32>, Timing), GenerateError> {
        // A benchmark repeats its prompt: it times the whole prefill every time.
        self.model.lock().map_err(|_| self.backend("a previous generation panicked".into()))?.prepare(&[]);
        self.decode_greedy(prompt, n, None, false, &mut |_| {})
    }

    fn decode_greedy(
        &self,
        prompt: &[u32],
        max_tokens: usize,
        deadline: Option<std::time::Duration>,
        stop: bool,
        on_token: &mut dyn FnMut(&[u32]),
    ) -> Result<(Vec<u32>, Timing), GenerateError> {
        let start = Instant::now();
        if prompt.is_empty() {
            return Err(self.backend("empty prompt".into()));
        }
        if prompt.len() + max_tokens > self.context_length {
            return Err(self.backend(format!(
                "prompt of {} tokens plus {max_tokens} to generate exceeds the context of {}",
                prompt.len(),
                self.context_length
            )));
        }
        let mut engine = self.model.lock().map_err(|_| self.backend("a previous generation panicked".into()))?;
        let reused = engine.prepare(prompt);
        let model = &mut engine.model;
        let run = |model: &mut Model, ids: &[u32], pos: usize| -> Result<u32, GenerateError> {
            let logits = model.forward(ids, pos, &self.device).map_err(|e| self.backend(e.to_string()))?;
            // Greedy: the first of the highest logits, so ties resolve the same way every time.
            let mut best = 0usize;
            for (i, &v) in logits.iter().enumerate() {
                if v > logits[best] {
                    best = i;
                }
            }
            Ok(best as u32)
        };
        let timeout = || GenerateError::Timeout { model: self.model_id.clone(), after: deadline.unwrap_or_default() };
        // The prompt goes in chunks: attention over a chunk is (chunk × context) rather than
        // (prompt × prompt), which keeps a long prompt's score matrices small.
        let mut next = 0;
        for (i, chunk) in prompt[reused..].chunks(PREFILL_CHUNK).enumerate() {
            next = run(model, chunk, reused + i * PREFILL_CHUNK)?;
        }
        engine.prompt = prompt.to_vec();
        let model = &mut engine.model;
        let prompt_seconds = start.elapsed().as_secs_f64();
        let mut out = Vec::new();
        while out.len() < max_tokens && !(stop && self.stops.contains(&next)) {
            if deadline.is_some_and(|d| start.elapsed() > d) {
                return Err(timeout());
            }
            out.push(next);
            on_token(&out);
            next = run(model, &[next], prompt.len() + out.len() - 1)?;
        }
        let timing = Timing {
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            prompt_seconds,
            generated_tokens: out.len(),
            generate_seconds: start.elapsed().as_secs_f64() - prompt_seconds,
        };
        Ok((out, timing))
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, GenerateError> {
        self.tokenizer.decode(ids, true).map_err(|e| self.backend(e.to_string()))
    }
}

/// Exact token counts for a ChatML model's prompts (see [`GgufGenerator::token_counter`]).
/// Each message is `<|im_start|>ROLE\nCONTENT<|im_end|>\n`: the special tokens are atomic and
/// a newline is a token of its own, so a prompt's count is the sum of its messages' plus the
/// opened assistant turn (`<|im_start|>assistant\n`). Names are not rendered, so they cost
/// nothing; tool calls are written into the text ([`strata_core::plain_chat_content`]) and
/// counted there.
pub struct ChatMlCounter {
    name: String,
    tokenizer: Tokenizer,
    /// What `<|im_start|>assistant\n` costs in this tokenizer.
    priming: usize,
}

impl std::fmt::Debug for ChatMlCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatMlCounter").field("name", &self.name).finish()
    }
}

impl strata_core::TokenCounter for ChatMlCounter {
    fn name(&self) -> &str {
        &self.name
    }

    fn count(&self, text: &str) -> usize {
        // A text the tokenizer cannot encode counts by its bytes: never fewer than it costs.
        self.tokenizer.encode(text, false).map_or(text.len(), |e| e.get_ids().len())
    }

    fn chat_format(&self) -> strata_core::ChatFormat {
        // `<|im_start|>`, the newline after the role, `<|im_end|>` and the newline after it;
        // the reply is primed by `<|im_start|>assistant\n`, counted when the counter is made.
        strata_core::ChatFormat { per_message: 4, per_name: 0, reply_priming: self.priming as u32 }
    }

    fn count_message(
        &self,
        role: Role,
        _name: Option<&str>,
        content: &str,
        _tool_call_id: Option<&str>,
        tool_calls: &[strata_core::ToolCall],
    ) -> usize {
        let text = strata_core::plain_chat_content(content, tool_calls);
        self.chat_format().per_message as usize + self.count(role.as_str()) + self.count(&text)
    }
}

impl Generator for GgufGenerator {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        let prompt = self.encode(&GgufGenerator::render(&request.messages))?;
        let (ids, timing) = self.generate_ids(&prompt, request.max_tokens, request.deadline)?;
        Ok(Generation {
            text: self.decode(&ids)?,
            prompt_tokens: prompt.len(),
            generated_tokens: ids.len(),
            reused_tokens: timing.reused_tokens,
        })
    }

    fn generate_streaming(
        &self,
        request: &GenerateRequest,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation, GenerateError> {
        let prompt = self.encode(&GgufGenerator::render(&request.messages))?;
        let mut sent = String::new();
        // The tokens so far decoded at each step: a piece goes out once it is whole (not half
        // of a character split over two tokens) and extends what was sent.
        let mut on_token = |ids: &[u32]| {
            if let Ok(now) = self.decode(ids) {
                if now.len() > sent.len() && now.starts_with(sent.as_str()) && !now.ends_with('\u{FFFD}') {
                    on_text(&now[sent.len()..]);
                    sent = now;
                }
            }
        };
        let (ids, timing) = self.decode_greedy(&prompt, request.max_tokens, request.deadline, true, &mut on_token)?;
        let whole = self.decode(&ids)?;
        // What was sent is the reply: the rest of the final decoding when it extends it.
        let text = match whole.strip_prefix(sent.as_str()) {
            Some(rest) => {
                if !rest.is_empty() {
                    on_text(rest);
                }
                whole
            }
            None => sent,
        };
        Ok(Generation {
            text,
            prompt_tokens: prompt.len(),
            generated_tokens: ids.len(),
            reused_tokens: timing.reused_tokens,
        })
    }
}
