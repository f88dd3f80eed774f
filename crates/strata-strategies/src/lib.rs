//! strata-strategies
