//! The tests against an S3-compatible object store (moto, which `bash scripts/test.sh` installs
//! and starts): the S3 remote manifest. A binary of their own, so that the other tiers run
//! without the server.

mod manifest_s3;
