//! Plain statistics of a list of values: mean, standard deviation, coefficient of variation,
//! and the mean and standard error of repetitions.

pub(super) fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (divisor n − 1); `None` for fewer than 2 values.
pub(super) fn sample_std(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// Coefficient of variation std/mean of `xs` with the population standard deviation (divisor
/// n: the spread of the distribution itself), dimensionless. `None` for no values, a
/// non-finite value or a zero mean.
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    let m = mean(xs).filter(|m| *m != 0.0)?;
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    Some(var.sqrt() / m.abs())
}

/// Mean and standard error of the mean (sample std with divisor n − 1, over √n) of repeated
/// measurements, in their unit (\[P0\]: error bar = standard error). The standard error is 0 for
/// one value; `None` for no values or a non-finite value.
pub fn mean_and_stderr(xs: &[f64]) -> Option<(f64, f64)> {
    let m = mean(xs)?;
    let se = sample_std(xs).map_or(0.0, |s| s / (xs.len() as f64).sqrt());
    Some((m, se))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_close, assert_some_close};

    #[test]
    fn coefficient_of_variation_uses_the_population_std() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population std 2 → 0.4.
        assert_some_close(
            coefficient_of_variation(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            0.4,
        );
        assert_eq!(coefficient_of_variation(&[]), None);
        assert_eq!(coefficient_of_variation(&[0.0, 0.0]), None);
    }

    #[test]
    fn mean_and_stderr_of_repetitions() {
        // 1, 2, 3, 4: mean 2.5, sample std √(5/3) = 1.291, stderr 1.291/2 = 0.6455.
        let (m, se) = mean_and_stderr(&[1.0, 2.0, 3.0, 4.0]).expect("values");
        assert_close(m, 2.5);
        assert_close(se, (5.0f64 / 3.0).sqrt() / 2.0);
        assert_eq!(mean_and_stderr(&[7.0]), Some((7.0, 0.0)));
        assert_eq!(mean_and_stderr(&[]), None);
        assert_eq!(mean_and_stderr(&[1.0, f64::NAN]), None);
    }
}
