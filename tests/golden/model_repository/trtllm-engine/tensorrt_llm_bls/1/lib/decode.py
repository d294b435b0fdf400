# bls lib decode
