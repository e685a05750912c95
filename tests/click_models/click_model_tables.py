"""Click-model parameters shared by the tests of ultra_multr.click_models."""

# Monte-Carlo tolerance in binomial standard deviations; every test is
# seeded, so this only guards against an unlucky choice of seed.
Z = 4.5

# ULTRA's user-browsing table (example/ClickModel/ubm_0.1_1_4_1.0.json), the
# shape of real UBM parameters.
UBM_TABLE = [
    [1.0], [0.98, 1.0], [1.0, 0.62, 0.95], [1.0, 0.77, 0.42, 0.82], [1.0, 0.92, 0.55, 0.31, 0.69],
    [1.0, 0.96, 0.63, 0.4, 0.22, 0.54], [1.0, 0.99, 0.73, 0.46, 0.29, 0.17, 0.47],
    [1.0, 1.0, 0.89, 0.52, 0.35, 0.24, 0.14, 0.43], [1.0, 1.0, 0.95, 0.68, 0.4, 0.29, 0.19, 0.12, 0.41],
    [1.0, 1.0, 1.0, 0.96, 0.52, 0.36, 0.27, 0.18, 0.12, 0.43],
]
CLICK_PROB = [0.1, 0.16, 0.28, 0.52, 1.0]
