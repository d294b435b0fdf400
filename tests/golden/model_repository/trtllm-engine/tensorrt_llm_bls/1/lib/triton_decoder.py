# bls lib triton_decoder
