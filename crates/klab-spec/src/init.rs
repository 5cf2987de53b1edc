//! `klab init`: a declared-operation manifest skeleton from a CUDA file's `__global__`
//! signatures (read by [`crate::signature`]).
//!
//! [`skeleton`] turns them into a manifest: `params` in the kernel's order, `const T*` a
//! buffer with role `in`, `T*` one with role `out` (marked: out or inout?), an integer
//! value a size variable, a floating one a scalar. What only the user knows (lengths, the
//! launch, useful bytes, the reference, the rules, scalar values) is the placeholder
//! [`PLACEHOLDER`], which the manifest parser refuses by field until it is filled in; notes
//! that need a decision are `# TODO` comments.

use std::path::{Component, Path, PathBuf};

use crate::declared::scalar_type_names;
use crate::manifest::PLACEHOLDER;
use crate::signature::{kernels, Elem, ParamKind};
use klab_core::dtype::Dtype;

/// Why no skeleton can be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitError {
    #[error("{file}: no __global__ function found{}", if *.through_macro { " (a #define in it writes __global__: kernels declared through such a macro cannot be listed; write their [[kernel]] entries by hand)" } else { "" })]
    NoKernel { file: String, through_macro: bool },
}

/// A written skeleton.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skeleton {
    /// The manifest's TOML.
    pub text: String,
    pub kernels: usize,
    /// How many placeholders it holds.
    pub placeholders: usize,
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// One line for a comment.
fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The manifest skeleton for the kernels of `src`. `source` is what the manifest's
/// `source` names (relative to the manifest's folder); `file` names the source in errors
/// and in the header.
pub fn skeleton(src: &str, source: &str, file: &str) -> Result<Skeleton, InitError> {
    let found = kernels(src);
    let through_macro = crate::signature::macro_writes_global(src);
    if found.is_empty() {
        return Err(InitError::NoKernel {
            file: file.into(),
            through_macro,
        });
    }
    let mut w = Writer::default();
    w.text += &format!(
        "# A declared-operation manifest written by `klab init {}` from its __global__\n\
         # signatures. Fill in every \"{PLACEHOLDER}\" (klab check names the first one left) and\n\
         # settle every \"# TODO\" note, then run klab check on this file. The format:\n\
         # docs/declared-operations.md in klab's repository.\n",
        flat(file)
    );
    if through_macro {
        w.text +=
            "# TODO: a #define in this source writes __global__: kernels declared through such a\n\
                   # macro cannot be listed; add a [[kernel]] for each by hand.\n";
    }
    w.text += &format!("source = {}\n", quote(source));
    let mut renamed = std::collections::BTreeSet::new();
    for (i, k) in found.iter().enumerate() {
        // Kernels of one name in two namespaces get their qualified names, so that the
        // manifest's names stay distinct (ops::k as ops_k); overloads are numbered (k_1,
        // k_2) and named by their parameter types as entries.
        let shared = found.iter().filter(|o| o.name == k.name).count() > 1;
        let overloads = found
            .iter()
            .filter(|o| o.qualified() == k.qualified())
            .count();
        let name = if shared {
            k.qualified().replace("::", "_")
        } else {
            k.name.clone()
        };
        let name = if overloads > 1 {
            let nth = found[..=i]
                .iter()
                .filter(|o| o.qualified() == k.qualified())
                .count();
            format!("{name}_{nth}")
        } else {
            name
        };
        // klab keys results by kernel name, and refuses a user's kernel named as one of
        // its own (the transpose lab's `copy`): such a kernel is drafted as user_NAME, or
        // user_NAME_2 where the source has a user_NAME too.
        if crate::registry::registry().builtin_named(&name).is_some() {
            let taken = |n: &str| found.iter().any(|o| o.name == n) || renamed.contains(n);
            let mut other = format!("user_{name}");
            let mut nth = 1;
            while taken(&other) {
                nth += 1;
                other = format!("user_{name}_{nth}");
            }
            w.text += &format!("# named {other}: {name} is the name of a kernel klab ships\n");
            renamed.insert(other.clone());
            w.kernel(k, &other, overloads > 1);
            continue;
        }
        w.kernel(k, &name, overloads > 1);
    }
    Ok(Skeleton {
        text: w.text,
        kernels: found.len(),
        placeholders: w.placeholders,
    })
}

/// Arguments of the right kinds for a template parameter list, as an example: `float` for a
/// type, `true` for a bool, 128 for a number (`typename T, int B` gives `float, 128`).
fn example_arguments(list: &str) -> String {
    let mut depth = 0i32;
    let mut params = vec![String::new()];
    for c in list.chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                params.push(String::new());
                continue;
            }
            _ => {}
        }
        params.last_mut().unwrap().push(c);
    }
    params
        .iter()
        .map(|p| {
            // A defaulted parameter may stay out, but an example names every one.
            let decl = p.split('=').next().unwrap_or("").trim();
            let first = decl.split_whitespace().next().unwrap_or("");
            match first {
                "typename" | "class" => "float",
                "bool" => "true",
                // 128 does not fit a signed char.
                "char" | "signed" | "int8_t" => "1",
                _ if decl.starts_with("template") => "TODO",
                _ => "128",
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The skeleton as it is written, and how many placeholders it holds.
#[derive(Default)]
struct Writer {
    text: String,
    placeholders: usize,
}

/// One kernel's parameters as the manifest's lines: the `params` entries, the size
/// variables, the buffers and the scalars.
#[derive(Default)]
struct ParamLines {
    params: Vec<String>,
    sizes: Vec<String>,
    size_names: Vec<String>,
    /// `NAME BYTES` for each buffer whose element type is known.
    element_bytes: Vec<String>,
    buffers: Vec<String>,
    scalars: Vec<String>,
    any_output: bool,
}

impl Writer {
    /// A placeholder value, counted.
    fn todo(&mut self) -> String {
        self.placeholders += 1;
        quote(PLACEHOLDER)
    }

    /// A `NAME:TYPE` parameter whose type is a placeholder, counted.
    fn typed_todo(&mut self, name: &str) -> String {
        self.placeholders += 1;
        quote(&format!("{name}:{PLACEHOLDER}"))
    }

    /// One `[[kernel]]` and its `[kernel.op]`, from its signature; an `overloaded` kernel's
    /// entry names its parameter types.
    fn kernel(&mut self, k: &crate::signature::Kernel, name: &str, overloaded: bool) {
        let names: Vec<String> = k
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| p.name.clone().unwrap_or_else(|| format!("arg{i}")))
            .collect();
        self.text += "\n";
        self.text += &format!(
            "# line {}: {}({})\n",
            k.line,
            k.name,
            flat(
                &k.params
                    .iter()
                    .map(|p| p.text.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
        if k.params.iter().any(|p| p.name.is_none()) {
            self.text += "# (parameters without a name in the source are called argN here)\n";
        }
        let entry = match &k.template {
            Some(list) => {
                self.text += &format!(
                    "# TODO: {} is a template <{}>: give the instance to run as the entry,\n\
                 # e.g. entry = \"{}<{}>\" (NVRTC instantiates it by that name).\n",
                    k.name,
                    flat(list),
                    k.qualified(),
                    example_arguments(list)
                );
                self.todo()
            }
            // One of several overloads, by its parameter types.
            None if overloaded => quote(&k.with_types()),
            // A plain C++ kernel is lowered by NVRTC from this name, like an extern "C" one;
            // a kernel in a namespace is reached by its qualified name.
            None => quote(&k.qualified()),
        };
        self.text += "[[kernel]]\n";
        self.text += &format!("name = {}\n", quote(name));
        self.text += &format!("entry = {entry}\n");
        self.text += "operation = \"declared\"\n";
        let lines = self.param_lines(k, &names);
        self.op_table(k, &names, lines);
    }

    /// Each parameter as the manifest declares it: a pointer is a buffer, an integer a size
    /// variable, a float a scalar; what klab cannot pass is a TODO that says why.
    fn param_lines(&mut self, k: &crate::signature::Kernel, names: &[String]) -> ParamLines {
        let mut out = ParamLines::default();
        for (p, name) in k.params.iter().zip(names) {
            match &p.kind {
                ParamKind::Pointer { elem, read_only } => {
                    out.params.push(quote(name));
                    let (dtype, note) = match elem {
                        Elem::Known(d) => (quote(d.name()), None),
                        Elem::Vector {
                            dtype,
                            count,
                            name: v,
                        } => (
                            quote(dtype.name()),
                            Some(format!(
                                "{v} is {count} {dtype} an element: len counts {dtype} elements"
                            )),
                        ),
                        Elem::Bool => (
                            quote(Dtype::U8.name()),
                            Some("bool elements: klab passes u8, each 0 or 1".into()),
                        ),
                        Elem::Unknown { name: ty, why } => {
                            (self.todo(), Some(format!("TODO: {}: {why}", flat(ty))))
                        }
                    };
                    let elem_dtype = match elem {
                        Elem::Known(d) | Elem::Vector { dtype: d, .. } => Some(*d),
                        Elem::Bool => Some(Dtype::U8),
                        Elem::Unknown { .. } => None,
                    };
                    if let Some(d) = elem_dtype {
                        out.element_bytes.push(format!("{name} {}", d.size_bytes()));
                    }
                    let integer = elem_dtype.is_some_and(Dtype::is_integer);
                    let mut line = format!(
                        "buffers.{name} = {{ dtype = {dtype}, len = {}, role = ",
                        self.todo()
                    );
                    let mut notes: Vec<String> = note.into_iter().collect();
                    if *read_only && *elem == Elem::Bool {
                        line += "\"in\", range = [0, 1] }";
                    } else if *read_only {
                        line += "\"in\" }";
                    } else {
                        out.any_output = true;
                        line += &format!("\"out\", compare = {} }}", self.todo());
                        notes.push(format!(
                        "TODO: out or inout? compare: {}",
                        if integer {
                            "\"exact\""
                        } else {
                            "{ allclose = { atol = 1e-5, rtol = 1e-5 } }, { ulp = 2 } or \"bitwise\""
                        }
                    ));
                    }
                    if !notes.is_empty() {
                        line += &format!("   # {}", notes.join("; "));
                    }
                    out.buffers.push(line);
                }
                ParamKind::Value(Elem::Known(d)) if d.is_integer() => {
                    out.size_names.push(name.clone());
                    if [Dtype::I32, Dtype::U32, Dtype::I64, Dtype::U64].contains(d) {
                        out.params.push(quote(&format!("{name}:{d}")));
                        out.sizes.push(format!("sizes.{name} = {{}}"));
                    } else {
                        // An 8- or 16-bit integer is a flag or a small constant, not a
                        // size: a scalar of 32 bits whose values fit the parameter.
                        out.size_names.pop();
                        let wide = if d.is_signed() {
                            Dtype::I32
                        } else {
                            Dtype::U32
                        };
                        out.params.push(quote(&format!("{name}:{wide}")));
                        out.scalars.push(format!(
                        "scalars.{name} = {{ type = \"{wide}\", values = [{}] }}   # {} is {d}: klab passes {wide}, whose every value must fit {d}",
                        self.todo(),
                        flat(&p.text)
                    ));
                    }
                }
                ParamKind::Value(Elem::Known(d)) if d.is_float() => {
                    out.params.push(quote(&format!("{name}:{d}")));
                    out.scalars.push(format!(
                    "scalars.{name} = {{ type = \"{d}\", values = [{}] }}   # cases cycle through the values",
                    self.todo()
                ));
                }
                // 0 and 1 in a 32-bit scalar: the driver copies the bool's one byte.
                ParamKind::Value(Elem::Bool) => {
                    out.params.push(quote(&format!("{name}:i32")));
                    out.scalars.push(format!(
                        "scalars.{name} = {{ type = \"i32\", values = [0, 1] }}   # {} is a bool: klab passes i32 0 or 1",
                        flat(&p.text)
                    ));
                }
                ParamKind::Value(elem) => {
                    let (ty, why) = match elem {
                        Elem::Known(d) => {
                            (d.name().to_string(), format!("klab passes no {d} scalar"))
                        }
                        Elem::Vector { name, .. } => (
                            name.clone(),
                            "a vector (or dim3) by value, which klab cannot pass".into(),
                        ),
                        Elem::Unknown { name, why } => (name.clone(), why.clone()),
                        // Drafted above; named here for the match's sake.
                        Elem::Bool => ("bool".into(), "a bool".into()),
                    };
                    out.params.push(self.typed_todo(name));
                    out.scalars.push(format!(
                    "scalars.{name} = {{ type = {}, values = [{}] }}   # TODO: {}: {why}; klab passes scalars as {}",
                    self.todo(),
                    self.todo(),
                    flat(&ty),
                    scalar_type_names()
                ));
                }
            }
        }
        out
    }

    /// `params`, then the `[kernel.op]` table: launch, useful bytes, reference, sizes,
    /// buffers and scalars.
    fn op_table(&mut self, k: &crate::signature::Kernel, names: &[String], mut lines: ParamLines) {
        self.text += &format!("params = [{}]\n", lines.params.join(", "));
        self.text += "\n[kernel.op]\n";
        // A size variable for a kernel that takes none: a name no parameter has.
        if lines.size_names.is_empty() {
            let free = ["n", "size", "len"]
                .into_iter()
                .find(|c| !names.iter().any(|n| n == c))
                .unwrap_or("n_elements");
            lines.size_names.push(free.to_string());
            lines.sizes.push(format!(
            "sizes.{free} = {{}}   # TODO: the kernel takes no integer of 32 or 64 bits: name the size variables its lengths use"
        ));
        }
        let first = &lines.size_names[0];
        let todo = self.todo();
        self.text += &format!(
        "grid = [{}]         # blocks, 1 to 3 expressions over the sizes, e.g. \"ceil_div({first}, 256)\"\n",
        todo
    );
        let bounds = k
            .launch_bounds
            .as_ref()
            .map(|b| {
                format!(
                    " (__launch_bounds__({}): at most {})",
                    flat(b),
                    flat(b.split(',').next().unwrap_or(b))
                )
            })
            .unwrap_or_default();
        let todo = self.todo();
        self.text += &format!(
            "block = [{}]        # threads per block, e.g. \"256\"{bounds}\n",
            todo
        );
        let per_element = if lines.element_bytes.is_empty() {
            String::new()
        } else {
            format!("; bytes per element: {}", lines.element_bytes.join(", "))
        };
        let todo = self.todo();
        self.text += &format!(
        "useful_bytes = {}   # the bytes the operation must move, for GB/s{per_element}; flops = \"...\" too\n",
        todo
    );
        let todo = self.todo();
        self.text += &format!(
        "reference = {{ c = {} }}   # \"file.c:function\" with the kernel's parameters, or command = [\"python3\", \"ref.py\"]\n",
        todo
    );
        for (i, s) in lines.sizes.iter().enumerate() {
            self.text += s;
            if i == 0 && !s.contains('#') {
                self.text += "   # klab derives the values from the launch, or give values = [...]";
            }
            self.text += "\n";
        }
        if !lines.buffers.is_empty() {
            self.text += &format!(
            "# len: elements, an expression over the sizes (e.g. \"{}\"); role in, out, inout or scratch\n",
            lines.size_names.join(" * ")
        );
        }
        if lines.buffers.is_empty() {
            self.text +=
                "# TODO: no pointer parameter: klab compares the buffers a kernel writes\n";
        } else if !lines.any_output {
            self.text += "# TODO: every pointer is const: give one buffer role out or inout, with a compare rule\n";
        }
        for b in lines.buffers.iter().chain(&lines.scalars) {
            self.text += b;
            self.text += "\n";
        }
    }
}

/// `file` relative to the folder `dir` (both absolute): what a manifest in `dir` writes
/// as its `source`. Lexical: resolve symbolic links first.
pub fn relative_to(dir: &Path, file: &Path) -> PathBuf {
    let a: Vec<Component> = dir.components().collect();
    let b: Vec<Component> = file.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return file.to_path_buf();
    }
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::tests::SRC;

    /// A kernel declared through a macro (`#define KERNEL __global__`) cannot be listed; the
    /// skeleton says so instead of leaving it out without a word.
    #[test]
    fn kernels_declared_through_a_macro_are_said_to_be_missing() {
        let src = "#define KERNEL __global__\nKERNEL void viamacro(float *x, int n) {}\n\
                   extern \"C\" __global__ void plain(float *x, int n) {}\n";
        let sk = skeleton(src, "k.cu", "k.cu").unwrap();
        assert_eq!(sk.kernels, 1);
        assert!(
            sk.text
                .contains("# TODO: a #define in this source writes __global__: kernels declared through such a"),
            "{}",
            sk.text
        );
        let only = "#define KERNEL __global__\nKERNEL void viamacro(float *x, int n) {}\n";
        let e = skeleton(only, "k.cu", "k.cu").unwrap_err().to_string();
        assert!(
            e.contains("kernels declared through such a macro cannot be listed"),
            "{e}"
        );
        assert!(
            !skeleton("extern \"C\" __global__ void k(int n) {}", "k.cu", "k.cu")
                .unwrap()
                .text
                .contains("#define")
        );
    }

    /// A kernel that takes no integer gets a size variable of a name no parameter has,
    /// said to be a TODO (once written as `lines.sizes.n` by a refactor no test saw).
    #[test]
    fn a_kernel_without_an_integer_gets_a_free_size_name() {
        let src = "extern \"C\" __global__ void fill(float *n, const float *size) {}";
        let sk = skeleton(src, "k.cu", "k.cu").unwrap();
        assert!(
            sk.text.lines().any(|l| l.starts_with(
                "sizes.len = {}   # TODO: the kernel takes no integer of 32 or 64 bits: name the size variables"
            )),
            "{}",
            sk.text
        );
        assert!(!sk.text.contains("lines."), "{}", sk.text);
    }

    #[test]
    fn no_kernel_and_broken_sources_are_an_error_never_a_panic() {
        let e = skeleton("int main() { return 0; }", "a.cu", "a.cu").unwrap_err();
        assert_eq!(e.to_string(), "a.cu: no __global__ function found");
        for src in [
            "__global__",
            "__global__ void",
            "__global__ void k(",
            "__global__ void k(float *x",
            "/* __global__ void k() {}",
            "\"__global__ void k() {}",
            "R\"(",
            "__global__ void __launch_bounds__(",
            "template < __global__ void k(T* x) {}",
            "'",
            "#",
        ] {
            let _ = kernels(src);
            let _ = skeleton(src, "a.cu", "a.cu");
        }
        // A byte at a time through the test source: every prefix parses.
        for end in (0..SRC.len()).filter(|i| SRC.is_char_boundary(*i)) {
            let _ = kernels(&SRC[..end]);
        }
        // Random soups of CUDA pieces: never a panic, and every skeleton is TOML.
        let pieces = [
            "__global__",
            " void ",
            " k",
            "(",
            ")",
            "{",
            "}",
            "<",
            ">",
            ",",
            "*",
            "&",
            "[",
            "]",
            "const ",
            "float",
            " x",
            " int",
            "extern \"C\"",
            "\"",
            "'",
            "/*",
            "*/",
            "//",
            "\n",
            "#",
            "\\",
            "template",
            "__launch_bounds__",
            "::",
            "=",
            ";",
            "R\"(",
            "unsigned ",
            "long ",
            "1'0",
            "typename T",
            "[[",
            "]]",
            " é",
            "float4",
            "bool ",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut soup = |n: u64| -> String {
                (0..n)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                    .collect()
            };
            // Half of them inside a kernel's parameter list.
            let (a, b, c) = (soup(8), soup(12), soup(8));
            let src = if a.len() % 2 == 0 {
                format!("{a}__global__ void k({b}) {{}}{c}")
            } else {
                format!("{a}{b}{c}")
            };
            if let Ok(s) = skeleton(&src, "a.cu", "a.cu") {
                toml::from_str::<toml::Value>(&s.text)
                    .unwrap_or_else(|e| panic!("{src:?}: {e}\n{}", s.text));
            }
        }
    }

    /// Fill every placeholder with a value that fits its field.
    fn fill(text: &str) -> String {
        text.replace("values = [\"TODO\"]", "values = [1.5]")
            .replace("compare = \"TODO\"", "compare = \"bitwise\"")
            .replace("c = \"TODO\"", "c = \"ref.c:ref\"")
            .replace("\"TODO\"", "\"1\"")
    }

    const LAYERNORM: &str = "extern \"C\" __global__ void layernorm(const float *x, float *y, int rows, int cols, float eps) {}\n\
        extern \"C\" __global__ void count(const int *x, unsigned int *hist, size_t n) {}\n";

    fn parse(text: &str) -> Result<crate::manifest::Manifest, crate::manifest::ManifestError> {
        crate::manifest::parse(
            "ln.toml",
            text,
            crate::manifest::Files::Given(&|_| Ok(("ln.cu".into(), LAYERNORM.into()))),
        )
    }

    #[test]
    fn the_skeleton_parses_once_filled_in_and_names_its_first_placeholder_until_then() {
        let s = skeleton(LAYERNORM, "ln.cu", "ln.cu").unwrap();
        assert_eq!(s.kernels, 2);
        let t = &s.text;
        assert!(t.contains("source = \"ln.cu\""), "{t}");
        assert!(
            t.contains("params = [\"x\", \"y\", \"rows:i32\", \"cols:i32\", \"eps:f32\"]"),
            "{t}"
        );
        assert!(
            t.contains("buffers.x = { dtype = \"f32\", len = \"TODO\", role = \"in\" }"),
            "{t}"
        );
        assert!(
            t.contains("role = \"out\", compare = \"TODO\" }   # TODO: out or inout?"),
            "{t}"
        );
        assert!(
            t.contains("scalars.eps = { type = \"f32\", values = [\"TODO\"] }"),
            "{t}"
        );
        assert!(
            t.contains("sizes.rows = {}") && t.contains("sizes.cols = {}"),
            "{t}"
        );
        assert!(t.contains("params = [\"x\", \"hist\", \"n:u64\"]"), "{t}");
        assert!(
            t.contains("compare: \"exact\""),
            "integers are compared exactly: {t}"
        );
        // Two kernels of 7 placeholders (grid, block, useful_bytes, reference, two lens, a
        // compare) and the scalar's values.
        assert_eq!(s.placeholders, 15, "{t}");
        assert_eq!(
            t.matches("\"TODO\"").count(),
            15 + 1,
            "and the header's mention: {t}"
        );
        let e = parse(t).unwrap_err();
        assert_eq!(
            e.to_string(),
            "manifest ln.toml: kernel[0].op.grid[0]: fill in TODO (written by klab init)"
        );
        let m = parse(&fill(t)).unwrap();
        assert_eq!(m.kernels.len(), 2);
        let op = m.kernels[0].op.as_ref();
        use crate::declared::{OpParam, Role};
        assert_eq!(
            op.params,
            [
                OpParam::Buffer("x".into()),
                OpParam::Buffer("y".into()),
                OpParam::Size("rows".into(), Dtype::I32),
                OpParam::Size("cols".into(), Dtype::I32),
                OpParam::Scalar("eps".into(), Dtype::F32),
            ]
        );
        assert_eq!(op.spec.buffers["x"].role, Role::In);
        assert_eq!(op.spec.buffers["y"].role, Role::Out);
        assert_eq!(op.spec.scalars["eps"].values, [1.5]);
        let op = m.kernels[1].op.as_ref();
        assert_eq!(op.spec.buffers["hist"].dtype, Dtype::U32);
    }

    /// `bool` buffers are drafted u8, an input's range 0 to 1, and a bool value a scalar of
    /// 0 and 1; the draft, filled in, loads against the kernel.
    #[test]
    fn bools_are_drafted_as_bytes_of_zero_and_one() {
        const MASK: &str = "extern \"C\" __global__ void mask(const bool *keep, bool *present, bool invert, int n) {}\n";
        let s = skeleton(MASK, "k.cu", "k.cu").unwrap();
        let t = &s.text;
        assert!(
            t.contains(
                "buffers.keep = { dtype = \"u8\", len = \"TODO\", role = \"in\", range = [0, 1] }"
            ),
            "{t}"
        );
        assert!(t.contains("buffers.present = { dtype = \"u8\""), "{t}");
        assert!(t.contains("compare: \"exact\""), "{t}");
        assert!(
            t.contains("scalars.invert = { type = \"i32\", values = [0, 1] }"),
            "{t}"
        );
        crate::manifest::parse(
            "k.toml",
            &fill(t),
            crate::manifest::Files::Given(&|_| Ok(("k.cu".into(), MASK.into()))),
        )
        .unwrap_or_else(|e| panic!("{e}\n{t}"));
    }

    /// `__half` and `__nv_bfloat16` values are scalars of their own format, and the drafted
    /// manifest, once filled in, loads against the kernel.
    #[test]
    fn half_precision_values_are_drafted_as_scalars_of_their_format() {
        const AXPBY: &str = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\
            extern \"C\" __global__ void axpby(const __half *x, __half *y, __half a, __nv_bfloat16 b, int n) {}\n";
        let s = skeleton(AXPBY, "k.cu", "k.cu").unwrap();
        let t = &s.text;
        assert!(
            t.contains("params = [\"x\", \"y\", \"a:f16\", \"b:bf16\", \"n:i32\"]"),
            "{t}"
        );
        assert!(t.contains("scalars.a = { type = \"f16\""), "{t}");
        assert!(t.contains("scalars.b = { type = \"bf16\""), "{t}");
        let m = crate::manifest::parse(
            "k.toml",
            &fill(t),
            crate::manifest::Files::Given(&|_| Ok(("k.cu".into(), AXPBY.into()))),
        )
        .unwrap_or_else(|e| panic!("{e}\n{t}"));
        use crate::declared::OpParam;
        let params = &m.kernels[0].op.as_ref().params;
        assert_eq!(params[2], OpParam::Scalar("a".into(), Dtype::F16));
        assert_eq!(params[3], OpParam::Scalar("b".into(), Dtype::Bf16));
    }

    #[test]
    fn what_klab_cannot_take_is_marked_and_still_parses_as_toml() {
        let s = skeleton(SRC, "k.cu", "k.cu").unwrap();
        let t = &s.text;
        assert_eq!(s.kernels, 7);
        toml::from_str::<toml::Value>(t).unwrap_or_else(|e| panic!("{e}\n{t}"));
        for needle in [
            "# TODO: tmpl is a template <typename T, int BLOCK>",
            "entry = \"tmpl<float, 128>\" (NVRTC instantiates it by that name)",
            "(__launch_bounds__(256, 2): at most 256)",
            "TODO: MyStruct: klab has no dtype for it (f16 bf16",
            "float4 is 4 f32 an element: len counts f32 elements",
            "\"flag:i32\"",
            "scalars.flag = { type = \"i32\", values = [0, 1] }   # bool flag is a bool: klab passes i32 0 or 1",
            "\"s:i32\"",
            "scalars.s = { type = \"i32\", values = [\"TODO\"] }   # short s is i16: klab passes i32, whose every value must fit i16",
            "params = [\"arg0\", \"arg1\", \"arg2:i32\"]",
            "# TODO: the kernel takes no integer",
            "# TODO: no pointer parameter",
        ] {
            assert!(t.contains(needle), "{needle}\n{t}");
        }
        // The template's entry is itself a placeholder.
        let tmpl = t.split("name = \"tmpl\"").nth(1).unwrap();
        assert!(tmpl.starts_with("\nentry = \"TODO\""), "{tmpl}");
    }

    /// The example instance names arguments of the template's own kinds.
    #[test]
    fn the_example_instance_fits_the_template() {
        assert_eq!(example_arguments("typename T, int BLOCK"), "float, 128");
        assert_eq!(example_arguments("class T"), "float");
        assert_eq!(
            example_arguments("class T, size_t N, char C"),
            "float, 128, 1"
        );
        assert_eq!(example_arguments("const int BLOCKSIZE"), "128");
        assert_eq!(
            example_arguments("typename T, bool Fast = false"),
            "float, true"
        );
        assert_eq!(
            example_arguments("typename T, typename Op = Sum<T>, int N"),
            "float, float, 128"
        );
    }

    /// A kernel named as one of klab's own (cuda-samples' transpose `copy`) is drafted
    /// under another name, which `klab check` takes.
    #[test]
    fn a_kernel_named_as_a_builtin_is_drafted_under_another_name() {
        let src = "__global__ void copy(float *odata, const float *idata, int n) {}\n";
        let s = skeleton(src, "k.cu", "k.cu").unwrap();
        assert!(
            s.text.contains("name = \"user_copy\"\nentry = \"copy\""),
            "{}",
            s.text
        );
        assert!(crate::registry::registry().builtin_named("copy").is_some());
        // A source with a user_copy of its own: the draft's names stay distinct.
        let both =
            format!("{src}__global__ void user_copy(float *o, const float *i, int n) {{}}\n");
        let s = skeleton(&both, "k.cu", "k.cu").unwrap();
        for needle in [
            "name = \"user_copy_2\"\nentry = \"copy\"",
            "name = \"user_copy\"\nentry = \"user_copy\"",
        ] {
            assert!(s.text.contains(needle), "{needle}\n{}", s.text);
        }
    }

    /// A kernel in a namespace gets its qualified name as the entry (the plain name would
    /// be refused), and its skeleton parses against the source.
    #[test]
    fn a_kernel_in_a_namespace_is_written_with_its_qualified_name() {
        let src = "namespace ops {\n__global__ void twice(float* y, const float* x, int n) {}\n}\n";
        let s = skeleton(src, "k.cu", "k.cu").unwrap();
        assert!(s.text.contains("entry = \"ops::twice\""), "{}", s.text);
        assert!(s.text.contains("name = \"twice\""), "{}", s.text);
        // One name in two namespaces: distinct manifest names.
        let two = "namespace fp32 { __global__ void k(float* y, int n) {} }\n\
                   namespace fp16 { __global__ void k(float* y, int n) {} }\n";
        let s = skeleton(two, "k.cu", "k.cu").unwrap();
        for needle in [
            "name = \"fp32_k\"",
            "entry = \"fp32::k\"",
            "name = \"fp16_k\"",
        ] {
            assert!(s.text.contains(needle), "{needle}\n{}", s.text);
        }
    }

    /// Overloads get numbered names and their parameter types as entries, and the
    /// skeleton's entries pick them.
    #[test]
    fn overloads_are_written_with_their_parameter_types() {
        let src = "__global__ void k(float* y, const float* x, int n) {}\n\
                   __global__ void k(double* __restrict__ y, const double* x, int n) {}\n";
        let s = skeleton(src, "k.cu", "k.cu").unwrap();
        for needle in [
            "name = \"k_1\"\nentry = \"k(float *, const float *, int)\"",
            "name = \"k_2\"\nentry = \"k(double *, const double *, int)\"",
        ] {
            assert!(s.text.contains(needle), "{needle}\n{}", s.text);
        }
    }

    #[test]
    fn a_source_path_is_made_relative_to_the_manifests_folder() {
        let r = |d: &str, f: &str| relative_to(Path::new(d), Path::new(f));
        assert_eq!(r("/a/b", "/a/b/k.cu"), PathBuf::from("k.cu"));
        assert_eq!(r("/a/b/c", "/a/b/k.cu"), PathBuf::from("../k.cu"));
        assert_eq!(r("/a/x", "/a/b/k.cu"), PathBuf::from("../b/k.cu"));
        assert_eq!(r("/", "/a/k.cu"), PathBuf::from("a/k.cu"));
    }
}
