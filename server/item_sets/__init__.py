"""Named item sets (``bank.item_sets``): admins save them, sessions draw from them."""
