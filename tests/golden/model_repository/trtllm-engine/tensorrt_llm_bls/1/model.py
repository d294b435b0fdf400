# bls
