//! Unit tests of fp8.rs that need no GPU: validation, enum values, scale lengths, errors, and
//! which checks run on a plan-cache hit.

use super::*;

fn fp8(m: u64, n: u64, k: u64) -> Fp8Gemm {
    Fp8Gemm {
        m,
        n,
        k,
        a_type: Fp8::E4M3,
        b_type: Fp8::E4M3,
        out: DType::BF16,
        lda: k as i64,
        ldb: k as i64,
        ldd: n as i64,
        scale_a: ScaleMode::Tensor,
        scale_b: ScaleMode::Tensor,
        bias: false,
        fast_accum: false,
    }
}

fn err(g: &Fp8Gemm) -> String {
    validate_fp8(g).unwrap_err().to_string()
}

#[test]
fn names_parse() {
    assert_eq!(Fp8::parse("float8_e5m2"), Some(Fp8::E5M2));
    assert_eq!(Fp8::parse("float8_e4m3fnuz"), None);
    assert_eq!(
        ScaleMode::parse("block128x128"),
        Some(ScaleMode::Block128x128)
    );
    assert_eq!(ScaleMode::parse("row"), None);
    assert_eq!(Fp8::E4M3.cuda(), 28);
    assert_eq!(Fp8::E5M2.cuda(), 29);
    let codes = [ScaleMode::Tensor, ScaleMode::Outer, ScaleMode::Block1x128].map(ScaleMode::code);
    assert_eq!(codes, [0, 3, 4]);
    assert_eq!(ScaleMode::Block128x128.code(), 5);
}

#[test]
fn scale_lengths_follow_the_layouts() {
    // K = 320: L = 3 blocks of 128 along K, padded to 4 in the 128x128 layout.
    assert_eq!(ScaleMode::Tensor.scale_len(300, 320), 1);
    assert_eq!(ScaleMode::Outer.scale_len(300, 320), 300);
    assert_eq!(ScaleMode::Block1x128.scale_len(300, 320), 900);
    assert_eq!(ScaleMode::Block128x128.scale_len(300, 320), 3 * 4);
    assert_eq!(ScaleMode::Block128x128.scale_len(128, 512), 4);
    assert_eq!(ScaleMode::Block128x128.scale_len(129, 640), 2 * 8);
}

#[test]
fn tn_layouts_swap_the_operands() {
    let mut g = fp8(8, 32, 64);
    g.lda = 80;
    g.ldb = 96;
    g.ldd = 40;
    let [a, b, d] = layouts(&g);
    assert_eq!((a.rows, a.cols, a.ld), (64, 32, 96)); // weights [N,K] as [K,N], op T
    assert_eq!((b.rows, b.cols, b.ld), (64, 8, 80)); // activations [M,K] as [K,M]
    assert_eq!((d.rows, d.cols, d.ld), (32, 8, 40)); // D [M,N] as [N,M]
    validate_fp8(&g).unwrap();
}

#[test]
fn validation_names_the_bad_field() {
    assert!(err(&fp8(4, 16, 24)).contains("K = 24"));
    assert!(err(&fp8(4, 24, 32)).contains("N = 24"));
    assert!(err(&fp8(0, 16, 32)).contains(">= 1"));
    let mut g = fp8(4, 16, 32);
    g.a_type = Fp8::E5M2;
    validate_fp8(&g).unwrap();
    g.b_type = Fp8::E5M2;
    assert!(err(&g).contains("float8_e5m2 x float8_e5m2"));
    let mut g = fp8(4, 16, 32);
    g.lda = 40;
    assert!(err(&g).contains("lda = 40"));
    g.lda = 16;
    assert!(err(&g).contains("lda = 16"));
    let mut g = fp8(4, 16, 32);
    g.ldd = 20;
    assert!(err(&g).contains("ldd = 20"));
    g.out = DType::F32;
    g.ldd = 20; // 80 bytes: aligned for fp32
    validate_fp8(&g).unwrap();
    g.out = DType::F64;
    assert!(err(&g).contains("float16, bfloat16 or float32"));
}

#[test]
fn mode_pairs_and_their_rules() {
    let mut g = fp8(6, 16, 256);
    for (a, b) in PAIRS {
        g.scale_a = a;
        g.scale_b = b;
        let r = validate_fp8(&g);
        // Block scaling needs M % 4 == 0; M = 6 passes only the non-block pairs.
        assert_eq!(r.is_ok(), !(a.is_block() || b.is_block()), "{a:?} {b:?}");
    }
    g.m = 8;
    for (a, b) in PAIRS {
        g.scale_a = a;
        g.scale_b = b;
        validate_fp8(&g).unwrap();
    }
    g.scale_a = ScaleMode::Tensor;
    g.scale_b = ScaleMode::Outer;
    assert!(err(&g).contains("not a pair"));
    g.scale_a = ScaleMode::Block128x128;
    g.scale_b = ScaleMode::Block128x128;
    assert!(err(&g).contains("not a pair"));
    g.scale_a = ScaleMode::Block1x128;
    g.scale_b = ScaleMode::Block128x128;
    g.fast_accum = true;
    assert!(err(&g).contains("fast_accum"));
    g.scale_a = ScaleMode::Outer;
    g.scale_b = ScaleMode::Outer;
    validate_fp8(&g).unwrap();
    g.bias = true;
    validate_fp8(&g).unwrap();
    g.out = DType::F32;
    assert!(err(&g).contains("fused bias"));
}

#[test]
fn library_and_device_requirements() {
    let mut g = fp8(8, 16, 128);
    assert_eq!(unsupported_reason(&g, 120000, Some((8, 9))), None);
    let old_gpu = unsupported_reason(&g, 130100, Some((8, 6))).unwrap();
    assert!(old_gpu.contains("8.9"), "{old_gpu}");
    g.scale_a = ScaleMode::Outer;
    g.scale_b = ScaleMode::Outer;
    let old_lib = unsupported_reason(&g, 120800, Some((9, 0))).unwrap();
    assert!(old_lib.contains("12.9.0"), "{old_lib}");
    assert_eq!(unsupported_reason(&g, 120900, Some((9, 0))), None);
    assert_eq!(unsupported_reason(&g, 130100, None), None);
    let d = describe(&g, 130100, "/x/libcublasLt.so.13", Some((9, 0)));
    for part in [
        "OUTER_VEC_32F, B (weights) CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F",
        "cuBLASLt 13.1.0 (130100)",
        "capability 9.0",
        "float8_e4m3fn x float8_e4m3fn -> BF16",
    ] {
        assert!(d.contains(part), "{part} not in {d}");
    }
    assert!(describe(&g, 130100, "p", None).contains("capability unknown"));
}

/// Operand, scale and output pointers all at `addr` (never dereferenced by these tests).
fn ptrs(addr: u64) -> Fp8Ptrs {
    Fp8Ptrs {
        a: addr,
        b: addr,
        d: addr,
        scale_a: addr,
        scale_b: addr,
        ..Fp8Ptrs::default()
    }
}

#[test]
fn matmul_fp8_without_library_is_an_error_not_a_panic() {
    let p = ptrs(256);
    let g = fp8(4, 16, 32);
    if loaded().is_none() {
        // SAFETY: returns before touching any pointer (the library is not loaded).
        let e = unsafe { matmul_fp8(0, 0, &g, &p) }.unwrap_err();
        assert!(e.to_string().contains("not loaded"), "{e}");
    }
    let q = Fp8Ptrs { scale_b: 0, ..p };
    // SAFETY: returns at the null-pointer check.
    let e = unsafe { matmul_fp8(0, 0, &g, &q) }.unwrap_err();
    assert!(e.to_string().contains("scale_b is a null pointer"), "{e}");
}

#[test]
fn invalid_descriptor_errors_on_every_call_and_is_never_cached() {
    // Validation runs only on a plan-cache miss; an invalid descriptor must never get a plan,
    // so its second call fails exactly like its first (before the pointer or library checks).
    let p = ptrs(256);
    let g = fp8(4, 16, 24); // K not a multiple of 16
    let first = err(&g);
    assert!(first.contains("K = 24"), "{first}");
    for q in [p, Fp8Ptrs { scale_b: 0, ..p }] {
        for call in 0..2 {
            // SAFETY: returns at validation, before touching any pointer.
            let e = unsafe { matmul_fp8(0, 0, &g, &q) }.unwrap_err().to_string();
            assert_eq!(e, first, "call {call}");
            assert!(plan::cached(&plan_key(0, &g, &q)).is_none());
        }
    }
}

#[test]
fn cache_hit_still_checks_pointers_and_library() {
    if loaded().is_some() {
        return; // a stand-in plan would be destroyed through the real library
    }
    let p = ptrs(512);
    let g = fp8(8, 32, 64);
    // No such device: the keys are this test's own. The plans are stand-ins (no library
    // loaded: their Drop destroys nothing).
    let device = 7919;
    let stand_in = || {
        Ok(Plan {
            desc: 0,
            layouts: [0; 3],
            algo: sys::cublasLtMatmulAlgo_t::default(),
        })
    };
    plan::plan_for(plan_key(device, &g, &p), |_| stand_in()).unwrap();
    assert!(plan::cached(&plan_key(device, &g, &p)).is_some());
    let q = Fp8Ptrs { d: 0, ..p };
    plan::plan_for(plan_key(device, &g, &q), |_| stand_in()).unwrap();
    // SAFETY: returns at the null-pointer check.
    let e = unsafe { matmul_fp8(device, 0, &g, &q) }.unwrap_err();
    assert!(e.to_string().contains("d is a null pointer"), "{e}");
    // SAFETY: returns at the library check.
    let e = unsafe { matmul_fp8(device, 0, &g, &p) }.unwrap_err();
    assert!(e.to_string().contains("not loaded"), "{e}");
    // The stand-ins go (no other unit test caches plans: that needs the library).
    plan::clear_plans();
}
