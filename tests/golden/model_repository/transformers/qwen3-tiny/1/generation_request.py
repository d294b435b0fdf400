# logic
