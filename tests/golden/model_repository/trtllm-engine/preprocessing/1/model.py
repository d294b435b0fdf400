# pre
