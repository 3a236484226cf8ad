"""The fixed claims, tables and summaries the tokenizer tests encode (numbers, unicode, empty
cells, separators, special tokens written in the text, over-long inputs)."""

CLAIMS = [
    "The chart shows that 12.5% of users in 2019 were under 25 years old.",
    "Coal is the second-lowest source of energy for electricity production in Romania.",
    "Revenue fell by −3.2 billion € in Q4 ’20 (from £1,200 to ¥3,400).",
    "Größe, café and naïve: São Paulo grew ½ as fast as Zürich — “quotes”.",
    "日本の東京 has 13,960,000 residents.",
    "",
    "   leading and  double  spaces  ",
    "numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14159 1e-6 -7 +8 50%",
]
TABLES = [
    "TITLE | Number of users in millions\nYear | Value\n2019 | 12.5\n2020 | \n2021 | 14",
    "TITLE | \n Other | 2 \n Hydro | 36% \n Coal | 33% \n Nuclear | 19% \n Gas | 10%",
    "TITLE | Größe<0x0A>Land | Anteil<0x0A>Österreich | ½<0x0A>日本 | −3.2",
    "Characteristic | 2018 | 2019 | 2020\nQ1 | 1,200 | | 3,400\nQ2 | | 7 |",
    "",
]
SUMMARIES = [
    "translate Chart to Text: Users <s> Year|2019|x|line_chart Value|12.5|y|line_chart",
    "In 2020, revenue reached $4.5 billion, up 7 percent from the previous year.",
    "Größe café 日本 −3.2 ½ “quotes” </s> <pad> after special tokens",
    "a <mask> b",
    "x" * 3 + " word" * 200,  # longer than any max length used
]
