//! Reads the weights of an ONNX file: its initializers (name, shape, element type, bytes) and
//! which module each quantized matrix product belongs to.
//!
//! Why our own reader: an ONNX file is a protobuf message, and of it we need two repeated
//! fields of the graph; a protobuf compiler at build time (candle-onnx's route) or an ONNX
//! runtime would be a large dependency for a few hundred lines of wire format. We never run
//! the graph: the model is ours ([`crate::bert`]); the file only supplies the numbers.
//!
//! ONNX Runtime's dynamic int8 quantization names things this way: a linear layer's matrix
//! becomes `<id>_quantized` (int8, shape `(in, out)`) with `<id>_scale` and `<id>_zero_point`
//! (one per tensor or one per output column), consumed by a `MatMulInteger` node whose output
//! is named after the module, `/bert/encoder/layer.0/attention/self/query/MatMul_…`; an
//! embedding table becomes uint8 with a scale and zero point, read through `DequantizeLinear`.

use std::collections::BTreeMap;

/// One initializer, its bytes borrowed from the file.
#[derive(Debug, Clone)]
pub(crate) struct Initializer<'a> {
    pub(crate) dims: Vec<usize>,
    /// ONNX's `TensorProto.DataType`: 1 float, 2 uint8, 3 int8, 6 int32, 7 int64.
    pub(crate) data_type: i32,
    raw: &'a [u8],
    /// Floats stored in `float_data` rather than `raw_data`.
    floats: Vec<f32>,
    /// Small integers stored in `int32_data` (how some writers keep int8 and uint8).
    ints: Vec<i32>,
}

const FLOAT: i32 = 1;
const UINT8: i32 = 2;
const INT8: i32 = 3;

/// The parts of an ONNX model we read.
#[derive(Debug)]
pub(crate) struct Onnx<'a> {
    pub(crate) initializers: BTreeMap<String, Initializer<'a>>,
    /// For each `MatMulInteger` (or `MatMul`) node: the module path its output names
    /// (`bert.encoder.layer.0.attention.self.query`) and its weight input's name.
    pub(crate) matmuls: BTreeMap<String, String>,
}

/// The wire format: varints, and fields tagged with a number and a wire type.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.at).ok_or("truncated varint")?;
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint too long at byte {}", self.at))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or("field runs past the end")?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// The next field, or `None` at the end.
    fn field(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.at >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|e| e.to_string())?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            t => return Err(format!("wire type {t} at byte {}", self.at)),
        };
        Ok(Some((key >> 3, value)))
    }
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

/// Packed varints (or one unpacked value) appended to `out`.
fn varints(v: Value<'_>, out: &mut Vec<i64>) -> Result<(), String> {
    match v {
        Value::Varint(x) => out.push(x as i64),
        Value::Bytes(b) => {
            let mut r = Reader::new(b);
            while r.at < b.len() {
                out.push(r.varint()? as i64);
            }
        }
        Value::Fixed => return Err("a fixed-width value where integers were expected".into()),
    }
    Ok(())
}

impl<'a> Onnx<'a> {
    /// Parses `bytes`, a serialized `ModelProto`.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Onnx<'a>, String> {
        let mut graph = None;
        let mut r = Reader::new(bytes);
        while let Some((n, v)) = r.field()? {
            if let (7, Value::Bytes(b)) = (n, v) {
                graph = Some(b);
            }
        }
        let graph = graph.ok_or("no graph: not an ONNX model")?;
        let mut onnx = Onnx { initializers: BTreeMap::new(), matmuls: BTreeMap::new() };
        let mut r = Reader::new(graph);
        while let Some((n, v)) = r.field()? {
            match (n, v) {
                (1, Value::Bytes(b)) => onnx.node(b)?,
                (5, Value::Bytes(b)) => {
                    let (name, init) = tensor(b)?;
                    onnx.initializers.insert(name, init);
                }
                _ => {}
            }
        }
        Ok(onnx)
    }

    fn node(&mut self, b: &[u8]) -> Result<(), String> {
        let (mut inputs, mut outputs, mut op) = (Vec::new(), Vec::new(), String::new());
        let mut r = Reader::new(b);
        while let Some((n, v)) = r.field()? {
            match (n, v) {
                (1, Value::Bytes(s)) => inputs.push(text(s)?),
                (2, Value::Bytes(s)) => outputs.push(text(s)?),
                (4, Value::Bytes(s)) => op = text(s)?,
                _ => {}
            }
        }
        if matches!(op.as_str(), "MatMulInteger" | "MatMul") {
            if let (Some(weight), Some(out)) = (inputs.get(1), outputs.first()) {
                // "/bert/encoder/layer.0/attention/self/query/MatMul_output_0_output_quantized"
                // → "bert.encoder.layer.0.attention.self.query"; the pooler's product is named
                // after its Gemm ("/bert/pooler/dense/Gemm_…").
                let path = out.trim_start_matches('/');
                if let Some(cut) = path.rfind('/') {
                    self.matmuls.insert(path[..cut].replace('/', "."), weight.clone());
                }
            }
        }
        Ok(())
    }

    fn get(&self, name: &str) -> Result<&Initializer<'a>, String> {
        self.initializers.get(name).ok_or_else(|| format!("no initializer {name}"))
    }

    /// A float tensor of the expected shape.
    pub(crate) fn floats(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let t = self.get(name)?;
        if t.dims != shape {
            return Err(format!("{name} has shape {:?}, expected {shape:?}", t.dims));
        }
        t.floats(name)
    }

    /// A quantized tensor `(q − zero_point) · scale` as floats, with one scale and zero point
    /// per tensor or per last-axis entry; `stem` names the three initializers.
    pub(crate) fn dequantized(&self, stem: &str) -> Result<(Vec<usize>, Vec<f32>), String> {
        let q = self.get(&format!("{stem}_quantized"))?;
        let scale = self.get(&format!("{stem}_scale"))?.floats(stem)?;
        let zero = self.get(&format!("{stem}_zero_point"))?.integers(stem)?;
        let cols = *q.dims.last().unwrap_or(&1);
        let per_column = |v: usize| v == cols && v != 1;
        if !(scale.len() == 1 || per_column(scale.len())) || zero.len() != scale.len() {
            return Err(format!("{stem}: {} scales and {} zero points for {:?}", scale.len(), zero.len(), q.dims));
        }
        let values = q.integers(stem)?;
        let out = values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let c = if scale.len() == 1 { 0 } else { i % cols };
                (v - zero[c]) as f32 * scale[c]
            })
            .collect();
        Ok((q.dims.clone(), out))
    }

    /// The weight matrix of the linear layer at `module`, as `(out, in)` int8 values with a
    /// scale per output row: the file stores `(in, out)` for `x · W`, symmetric (zero point 0).
    pub(crate) fn linear_int8(&self, module: &str) -> Result<(usize, usize, Vec<i8>, Vec<f32>), String> {
        let stem = self.matmul_weight(module)?;
        let q = self.get(&format!("{stem}_quantized"))?;
        if q.data_type != INT8 || q.dims.len() != 2 {
            return Err(format!("{stem}: expected a 2-D int8 matrix, found type {} {:?}", q.data_type, q.dims));
        }
        let (inp, out) = (q.dims[0], q.dims[1]);
        let zero = self.get(&format!("{stem}_zero_point"))?.integers(&stem)?;
        if zero.iter().any(|&z| z != 0) {
            return Err(format!("{stem}: asymmetric weights (zero point not 0) are not supported"));
        }
        let scale = self.get(&format!("{stem}_scale"))?.floats(&stem)?;
        let scale = match scale.len() {
            1 => vec![scale[0]; out],
            n if n == out => scale,
            n => return Err(format!("{stem}: {n} scales for {out} output columns")),
        };
        let values = q.integers(&stem)?;
        let mut rows = vec![0i8; out * inp];
        for i in 0..inp {
            for o in 0..out {
                rows[o * inp + i] = values[i * out + o] as i8;
            }
        }
        Ok((out, inp, rows, scale))
    }

    /// The initializer stem of `module`'s matrix: `<module>.weight`, or the one
    /// (`onnx::MatMul_1662`) of the product whose output names `module`.
    fn matmul_weight(&self, module: &str) -> Result<String, String> {
        // Modules whose weights kept their name (the pooler, the classifier).
        let named = format!("{module}.weight");
        if self.initializers.contains_key(&format!("{named}_quantized")) {
            return Ok(named);
        }
        self.matmuls
            .get(module)
            .map(|w| w.trim_end_matches("_quantized").to_string())
            .ok_or_else(|| format!("no matrix product for {module}"))
    }
}

/// A `TensorProto`: its name and contents.
fn tensor(b: &[u8]) -> Result<(String, Initializer<'_>), String> {
    let mut t = Initializer { dims: Vec::new(), data_type: 0, raw: &[], floats: Vec::new(), ints: Vec::new() };
    let mut name = String::new();
    let (mut dims, mut ints) = (Vec::new(), Vec::new());
    let mut r = Reader::new(b);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, v) => varints(v, &mut dims)?,
            (2, Value::Varint(x)) => t.data_type = x as i32,
            (4, Value::Bytes(p)) => {
                t.floats.extend(p.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            }
            (5, v) => varints(v, &mut ints)?,
            (8, Value::Bytes(s)) => name = text(s)?,
            (9, Value::Bytes(raw)) => t.raw = raw,
            // data_location EXTERNAL: the numbers live in another file.
            (14, Value::Varint(1)) => return Err(format!("{name}: weights in an external file are not supported")),
            _ => {}
        }
    }
    t.dims = dims.into_iter().map(|d| usize::try_from(d).unwrap_or(0)).collect();
    t.ints = ints.into_iter().map(|v| v as i32).collect();
    Ok((name, t))
}

impl Initializer<'_> {
    fn len(&self) -> usize {
        self.dims.iter().product()
    }

    fn floats(&self, name: &str) -> Result<Vec<f32>, String> {
        if self.data_type != FLOAT {
            return Err(format!("{name}: element type {} where floats were expected", self.data_type));
        }
        let v: Vec<f32> = if self.raw.is_empty() {
            self.floats.clone()
        } else {
            self.raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        };
        if v.len() != self.len() {
            return Err(format!("{name}: {} values for shape {:?}", v.len(), self.dims));
        }
        Ok(v)
    }

    /// int8 or uint8 values, widened.
    fn integers(&self, name: &str) -> Result<Vec<i32>, String> {
        let v: Vec<i32> = match (self.data_type, self.raw.is_empty()) {
            (INT8, false) => self.raw.iter().map(|&b| i32::from(b as i8)).collect(),
            (UINT8, false) => self.raw.iter().map(|&b| i32::from(b)).collect(),
            (INT8 | UINT8, true) => self.ints.clone(),
            (t, _) => return Err(format!("{name}: element type {t} where 8-bit integers were expected")),
        };
        if v.len() != self.len() {
            return Err(format!("{name}: {} values for shape {:?}", v.len(), self.dims));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Protobuf encoding helpers, the inverse of the reader, for hand-built models.
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes_field(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn int_field(n: u64, v: u64, out: &mut Vec<u8>) {
        varint(n << 3, out);
        varint(v, out);
    }

    fn tensor_bytes(name: &str, dims: &[u64], data_type: u64, raw: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        for &d in dims {
            int_field(1, d, &mut t);
        }
        int_field(2, data_type, &mut t);
        bytes_field(8, name.as_bytes(), &mut t);
        bytes_field(9, raw, &mut t);
        t
    }

    fn model(initializers: &[Vec<u8>], nodes: &[Vec<u8>]) -> Vec<u8> {
        let mut g = Vec::new();
        for n in nodes {
            bytes_field(1, n, &mut g);
        }
        for t in initializers {
            bytes_field(5, t, &mut g);
        }
        let mut m = Vec::new();
        int_field(1, 8, &mut m); // ir_version, skipped
        bytes_field(7, &g, &mut m);
        m
    }

    fn node(op: &str, inputs: &[&str], output: &str) -> Vec<u8> {
        let mut n = Vec::new();
        for i in inputs {
            bytes_field(1, i.as_bytes(), &mut n);
        }
        bytes_field(2, output.as_bytes(), &mut n);
        bytes_field(4, op.as_bytes(), &mut n);
        n
    }

    #[test]
    fn a_quantized_linear_layer_is_read_transposed_with_its_scales() {
        // W is (in 2, out 3) in the file: x · W. Per-column scales.
        let q: Vec<u8> = [1i8, -2, 3, -4, 5, -127].iter().map(|&v| v as u8).collect();
        let scales: Vec<u8> = [0.5f32, 0.25, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let bytes = model(
            &[
                tensor_bytes("onnx::MatMul_7_quantized", &[2, 3], 3, &q),
                tensor_bytes("onnx::MatMul_7_scale", &[3], 1, &scales),
                tensor_bytes("onnx::MatMul_7_zero_point", &[3], 3, &[0, 0, 0]),
            ],
            &[node(
                "MatMulInteger",
                &["x_quantized", "onnx::MatMul_7_quantized"],
                "/bert/encoder/layer.0/attention/self/query/MatMul_output_0_output_quantized",
            )],
        );
        let onnx = Onnx::parse(&bytes).unwrap();
        let (out, inp, rows, scale) = onnx.linear_int8("bert.encoder.layer.0.attention.self.query").unwrap();
        assert_eq!((out, inp), (3, 2));
        assert_eq!(rows, vec![1, -4, -2, 5, 3, -127]);
        assert_eq!(scale, vec![0.5, 0.25, 2.0]);
        let err = onnx.linear_int8("bert.pooler.dense").unwrap_err();
        assert!(err.contains("bert.pooler.dense"), "{err}");
    }

    #[test]
    fn an_embedding_table_is_dequantized_with_its_zero_point() {
        let bytes = model(
            &[
                tensor_bytes("e.weight_quantized", &[2, 2], 2, &[10, 12, 8, 255]),
                tensor_bytes("e.weight_scale", &[], 1, &0.5f32.to_le_bytes()),
                tensor_bytes("e.weight_zero_point", &[], 2, &[10]),
            ],
            &[],
        );
        let onnx = Onnx::parse(&bytes).unwrap();
        let (dims, v) = onnx.dequantized("e.weight").unwrap();
        assert_eq!(dims, vec![2, 2]);
        assert_eq!(v, vec![0.0, 1.0, -1.0, 122.5]);
        assert!(onnx.floats("e.weight_scale", &[3]).unwrap_err().contains("shape"));
    }

    #[test]
    fn a_truncated_file_is_an_error_not_a_panic() {
        let bytes = model(&[tensor_bytes("a", &[1], 1, &1f32.to_le_bytes())], &[]);
        for cut in 1..bytes.len() {
            let _ = Onnx::parse(&bytes[..cut]);
        }
        assert!(Onnx::parse(&bytes[..bytes.len() - 3]).is_err());
        assert!(Onnx::parse(b"").unwrap_err().contains("not an ONNX model"));
    }
}
