# post
