//! strata-transcript
